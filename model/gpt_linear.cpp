// The linear layers of Gpt: one place that decides which GEMMs run in FP8 (Precision::kFp8:
// the blocks' layers, the LM head when the recipe asks) and which run as the kernels' matmul
// of the activation type. gemm_backward (gpt_backward.cpp) is the backward's half.
#include <type_traits>

#include "model/gpt_buffers.hpp"

namespace holmes::model {

template <class A>
void Gpt::linear_forward(A* out, const A* inp, const A* weight, const A* bias, int N, int C, int OC, bool head) {
  if constexpr (std::is_same_v<A, bf16>) {
    if (fp8_gemms(head)) return k_.matmul_forward_fp8(out, inp, weight, bias, N, C, OC, fp8_);
  }
  k_.matmul_forward(out, inp, weight, bias, N, C, OC);
}

template <class A>
void Gpt::linear_gelu_forward(A* out, A* pre, const A* inp, const A* weight, const A* bias, int N, int C, int OC) {
  if (fp8_gemms(false)) {
    // No GELU epilogue on FP8 GEMMs here: the GEMM, then GELU as its own op.
    linear_forward<A>(pre, inp, weight, bias, N, C, OC);
    k_.gelu_forward(out, pre, static_cast<size_t>(N) * OC);
    return;
  }
  k_.matmul_gelu_forward(out, pre, inp, weight, bias, N, C, OC);
}

template <class A>
void Gpt::linear_dgelu_backward(A* dpre, float* dweight, float* dbias, const A* dout, const A* inp, const A* weight,
                                const A* pre, int N, int C, int OC) {
  if (fp8_gemms(false)) {
    gemm_backward<A>(Pass::kAll, dpre, dweight, dbias, dout, inp, weight, N, C, OC);
    k_.gelu_backward(dpre, pre, dpre, static_cast<size_t>(N) * C);
    return;
  }
  k_.matmul_dgelu_backward(dpre, dweight, dbias, dout, inp, weight, pre, N, C, OC);
}

template void Gpt::linear_forward<float>(float*, const float*, const float*, const float*, int, int, int, bool);
template void Gpt::linear_forward<bf16>(bf16*, const bf16*, const bf16*, const bf16*, int, int, int, bool);
template void Gpt::linear_gelu_forward<float>(float*, float*, const float*, const float*, const float*, int, int, int);
template void Gpt::linear_gelu_forward<bf16>(bf16*, bf16*, const bf16*, const bf16*, const bf16*, int, int, int);
template void Gpt::linear_dgelu_backward<float>(float*, float*, float*, const float*, const float*, const float*,
                                                const float*, int, int, int);
template void Gpt::linear_dgelu_backward<bf16>(bf16*, float*, float*, const bf16*, const bf16*, const bf16*,
                                               const bf16*, int, int, int);

}  // namespace holmes::model
