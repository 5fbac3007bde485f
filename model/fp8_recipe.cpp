#include "model/fp8_recipe.hpp"

#include <fmt/format.h>

namespace holmes::model {

namespace {

std::optional<Fp8Format> format_named(std::string_view name) {
  if (name == "e4m3") return Fp8Format::kE4M3;
  if (name == "e5m2") return Fp8Format::kE5M2;
  return std::nullopt;
}

}  // namespace

std::string describe(const Fp8Recipe& r) {
  return fmt::format("fp8 {} weights/activations, {} gradients, current per-tensor power-of-two scaling, LM head {}",
                     fp8_format_name(r.forward), fp8_format_name(r.backward), r.lm_head ? "fp8" : "bf16");
}

std::string recipe_text(const Fp8Recipe& r) {
  return fmt::format("{}/{}/current/head={}", fp8_format_name(r.forward), fp8_format_name(r.backward),
                     r.lm_head ? "fp8" : "bf16");
}

std::optional<Fp8Recipe> parse_fp8_recipe(std::string_view text) {
  // Four fields separated by '/'.
  std::string_view fields[4];
  for (int i = 0; i < 4; ++i) {
    const size_t slash = text.find('/');
    if ((slash == std::string_view::npos) != (i == 3)) return std::nullopt;
    fields[i] = text.substr(0, slash);
    text = i == 3 ? std::string_view() : text.substr(slash + 1);
  }
  const auto forward = format_named(fields[0]), backward = format_named(fields[1]);
  // E5M2 x E5M2 has no FP8 GEMM (cuBLASLt), so the forward operands are E4M3.
  if (forward != Fp8Format::kE4M3 || !backward || fields[2] != "current") return std::nullopt;
  Fp8Recipe r;
  r.forward = *forward;
  r.backward = *backward;
  if (fields[3] == "head=fp8")
    r.lm_head = true;
  else if (fields[3] != "head=bf16")
    return std::nullopt;
  return r;
}

}  // namespace holmes::model
