#include "cuda/matmul.hpp"

#include "cuda/pointwise.hpp"

namespace holmes::cuda {

void matmul_forward(GemmRunner& gemm, void* out, const void* inp, const void* weight,
                    const void* bias, int bt, int c, int oc, DType type, cudaStream_t stream) {
  GemmShape s;
  s.m = bt;
  s.n = oc;
  s.k = c;
  s.trans_a = false;
  s.trans_b = true;  // weight is stored [OC, C]
  s.ab_type = s.c_type = type;
  s.bias = bias != nullptr;
  gemm.run(out, inp, weight, bias, s, 1.0f, 0.0f, stream);
}

void matmul_backward(GemmRunner& gemm, void* dinp, void* dweight, void* dbias, const void* dout,
                     const void* inp, const void* weight, int bt, int c, int oc, DType type,
                     cudaStream_t stream) {
  // dinp[BT,C] = dout[BT,OC] * weight[OC,C]: k = OC, neither operand transposed.
  GemmShape din;
  din.m = bt;
  din.n = c;
  din.k = oc;
  din.trans_a = false;
  din.trans_b = false;
  din.ab_type = din.c_type = type;
  if (dinp) gemm.run(dinp, dout, weight, nullptr, din, 1.0f, 0.0f, stream);  // null: first layer

  // dweight[OC,C] += dout^T[OC,BT] * inp[BT,C]: dout is stored [BT,OC] = [k,m] -> trans_a.
  GemmShape dw;
  dw.m = oc;
  dw.n = c;
  dw.k = bt;
  dw.trans_a = true;
  dw.trans_b = false;
  dw.ab_type = dw.c_type = type;
  gemm.run(dweight, dout, inp, nullptr, dw, 1.0f, 1.0f, stream);

  if (!dbias) return;
  if (type == DType::kF32)
    bias_backward(static_cast<float*>(dbias), static_cast<const float*>(dout), bt, oc, stream);
  else
    bias_backward(static_cast<bf16*>(dbias), static_cast<const bf16*>(dout), bt, oc, stream);
}

}  // namespace holmes::cuda
