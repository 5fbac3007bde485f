// The GPU-free half of attention planning (attention.hpp): which method a user forced, whether
// a shape is valid, where each head's Q, K, V live inside the qkv buffer (rows [q NH heads | k
// KVH heads | v KVH heads] of HS = C/NH channels), what cuDNN can take, and how many floats
// each method keeps. Pure functions, unit-tested without a GPU.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "common/dtype.hpp"
#include "model/bf16.hpp"

namespace holmes::cuda {

enum class AttentionMethod { kAuto, kCudnn, kFallback, kExact };

const char* attention_method_name(AttentionMethod m);  // "auto", "cudnn", "fallback", "exact"

// The method HOLMES_ATTENTION names: nullptr or "" = no override (nullopt); "cudnn",
// "fallback", "exact" (case-sensitive). Anything else throws UserError naming the variable,
// the value and the accepted values.
std::optional<AttentionMethod> parse_attention_env(const char* value);

// Throws UserError unless B, T, C, NH, KVH > 0, C % NH == 0 and NH % KVH == 0; names the
// first bad value.
void validate_attention_shape(int B, int T, int C, int NH, int KVH);

// A [B, NH, T, HS] view of one of Q, K, V (or of out) as cuDNN tensors take it: dims, strides
// in elements, and the element offset of its first value from the buffer's start.
struct HeadView {
  std::array<std::int64_t, 4> dims{}, strides{};
  std::int64_t offset = 0;
};
// part 0, 1, 2 = Q, K, V inside qkv (B,T,W), W = (NH + 2 KVH) HS: dims [B, NH or KVH, T, HS],
// strides [T*W, HS, W, 1], offsets 0, C and C + KVH*HS.
HeadView qkv_view(int B, int T, int C, int NH, int KVH, int part);
// out (B,T,C) (also dout): strides [T*C, HS, C, 1].
HeadView out_view(int B, int T, int C, int NH);

// cuDNN's fused attention limits for this library: head size a multiple of 8 and at most 128
// (the widest cuDNN 9 supports for training on every version), a cuDNN 9 release other than
// 9.10.0 and 9.10.1 (wrong bf16 attention), and (for cuDNN 9.15 and older, whose backward needs a
// padding mask otherwise) T a multiple of 128; T >= 2 (the backward refuses T = 1).
// Returns "" when supported, else why not.
std::string cudnn_attention_limits(long cudnn_version, int T, int HS);

// The state (`att`) and workspace (`scratch`) floats of a method for micro-batches up to
// (B, T) with NH heads:
//   cudnn:    softmax statistics (B,NH,T) fp32; no scratch (the object owns cuDNN's workspace);
//   fallback: probabilities (B,NH,T,T) in the activation precision (bf16 packs two per float);
//             scratch holds dP fp32 (B,NH,T,T) and, for bf16, dS bf16 beside it;
//   exact:    probabilities and score gradients, fp32, (B,NH,T,T) each.
struct AttentionSizes {
  std::size_t state_floats = 0, scratch_floats = 0;
};
AttentionSizes attention_sizes(AttentionMethod m, DType p, int B, int T, int NH);

// The bytes of the cudnn method's document bias (B,T,T) bf16 (cudnn_sdpa.hpp, kDocumentBias),
// owned by the Attention object beside cuDNN's workspace.
std::size_t document_bias_bytes(int B, int T);

// The lowest finite bf16 (-3.39e38), what the document bias puts on the keys a query may not
// see: exp() of it gives 0, and fp32 sums with it stay finite (no inf - inf).
constexpr std::uint16_t kBf16LowestBits = 0xFF7F;

// The CPU twin of document_bias (attention_bias.hpp): bias (B,T,T) bf16 bits, row (b, t) 0 for
// keys t - pos[b*T + t] .. t, kBf16LowestBits elsewhere. pos (B,T), 0 <= pos[b,t] <= t
// (std::invalid_argument naming the token otherwise).
void document_bias_reference(std::uint16_t* bias, const int* pos, int B, int T);

}  // namespace holmes::cuda
