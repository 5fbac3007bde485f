#include "cuda/attention_plan.hpp"

#include <fmt/format.h>

#include <cstring>
#include <stdexcept>

#include "common/errors.hpp"

namespace holmes::cuda {

const char* attention_method_name(AttentionMethod m) {
  switch (m) {
    case AttentionMethod::kAuto:
      return "auto";
    case AttentionMethod::kCudnn:
      return "cudnn";
    case AttentionMethod::kFallback:
      return "fallback";
    case AttentionMethod::kExact:
      return "exact";
  }
  return "?";
}

std::optional<AttentionMethod> parse_attention_env(const char* value) {
  if (value == nullptr || *value == '\0') return std::nullopt;
  for (AttentionMethod m :
       {AttentionMethod::kCudnn, AttentionMethod::kFallback, AttentionMethod::kExact})
    if (std::strcmp(value, attention_method_name(m)) == 0) return m;
  throw UserError(fmt::format(
      "HOLMES_ATTENTION = '{}' is not an attention method; accepted: cudnn, fallback, exact "
      "(or unset for the automatic choice)",
      value));
}

void validate_attention_shape(int B, int T, int C, int NH, int KVH) {
  auto bad = [](const char* what, long long v, const char* accepted) {
    throw UserError(fmt::format("attention: {} = {}; accepted: {}", what, v, accepted));
  };
  if (B <= 0) bad("B (micro-batch)", B, "> 0");
  if (T <= 0) bad("T (sequence length)", T, "> 0");
  if (NH <= 0) bad("NH (heads)", NH, "> 0");
  if (C <= 0) bad("C (channels)", C, "> 0");
  if (C % NH != 0)
    throw UserError(fmt::format("attention: C = {} is not a multiple of NH = {}", C, NH));
  if (KVH <= 0) bad("KVH (key/value heads)", KVH, "> 0");
  if (NH % KVH != 0)
    throw UserError(fmt::format("attention: NH = {} query heads is not a multiple of KVH = {} key/value heads",
                                NH, KVH));
}

HeadView qkv_view(int B, int T, int C, int NH, int KVH, int part) {
  const std::int64_t HS = C / NH, row = (NH + 2 * std::int64_t{KVH}) * HS;
  HeadView v;
  v.dims = {B, part == 0 ? NH : KVH, T, HS};
  v.strides = {T * row, HS, row, 1};
  v.offset = part == 0 ? 0 : C + (part - 1) * KVH * HS;
  return v;
}

HeadView out_view(int B, int T, int C, int NH) {
  const std::int64_t HS = C / NH;
  HeadView v;
  v.dims = {B, NH, T, HS};
  v.strides = {T * std::int64_t{C}, HS, C, 1};
  return v;
}

std::string cudnn_attention_limits(long cudnn_version, int T, int HS) {
  if (cudnn_version < 90000)
    return fmt::format("cuDNN {} is older than 9.0", cudnn_version);
  // cudnn-frontend refuses bf16/fp16 attention on these two releases (known wrong results).
  if (cudnn_version == 91000 || cudnn_version == 91001)
    return fmt::format("cuDNN {} has known bf16 attention bugs (fixed in 9.10.2)", cudnn_version);
  // cudnn-frontend refuses s_q = s_kv = 1 for the backward.
  if (T < 2) return fmt::format("cuDNN's backward does not take T = {} (needs T >= 2)", T);
  if (HS % 8 != 0 || HS > 128)
    return fmt::format("head size {} is not a multiple of 8 up to 128", HS);
  if (cudnn_version <= 91500 && T % 128 != 0)
    return fmt::format("cuDNN {} needs T a multiple of 128 for its backward, T = {}",
                       cudnn_version, T);
  return "";
}

AttentionSizes attention_sizes(AttentionMethod m, DType p, int B, int T, int NH) {
  const std::size_t rows = std::size_t(B) * NH * T, probs = rows * T;
  const std::size_t half = (probs + 1) / 2;  // bf16 values packed two per float
  switch (m) {
    case AttentionMethod::kCudnn:
      return {rows, 0};
    case AttentionMethod::kFallback:
      if (p == DType::kBf16) return {half, probs + half};
      return {probs, probs};
    case AttentionMethod::kExact:
    case AttentionMethod::kAuto:
      break;
  }
  return {probs, probs};
}

std::size_t document_bias_bytes(int B, int T) { return std::size_t(B) * T * T * 2; }

void document_bias_reference(std::uint16_t* bias, const int* pos, int B, int T) {
  for (std::int64_t r = 0; r < std::int64_t{B} * T; ++r) {
    const int t = int(r % T);
    if (pos[r] < 0 || pos[r] > t)
      throw std::invalid_argument(fmt::format("document_bias: pos[{}] = {} at token {} of a sequence; accepted: 0 .. {}",
                                              r, pos[r], t, t));
    for (int j = 0; j < T; ++j) bias[r * T + j] = j >= t - pos[r] && j <= t ? 0 : kBf16LowestBits;
  }
}

}  // namespace holmes::cuda
