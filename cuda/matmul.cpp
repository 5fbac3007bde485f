#include "cuda/matmul.hpp"

#include "cuda/pointwise.hpp"

namespace holmes::cuda {

namespace {

// out[BT,OC] = inp[BT,C] * weight[OC,C]^T (+ bias), weight stored [OC, C].
GemmShape forward_shape(int bt, int c, int oc, DType type, bool bias) {
  GemmShape s;
  s.m = bt;
  s.n = oc;
  s.k = c;
  s.trans_a = false;
  s.trans_b = true;
  s.ab_type = s.c_type = type;
  s.bias = bias;
  return s;
}

// dinp[BT,C] = dout[BT,OC] * weight[OC,C]: k = OC, neither operand transposed.
GemmShape input_grad_shape(int bt, int c, int oc, DType type) {
  GemmShape s;
  s.m = bt;
  s.n = c;
  s.k = oc;
  s.trans_a = false;
  s.trans_b = false;
  s.ab_type = s.c_type = type;
  return s;
}

// dweight[OC,C] += dout^T[OC,BT] * inp[BT,C] (and the bias gradient).
void weight_grads(GemmRunner& gemm, void* dweight, void* dbias, const void* dout, const void* inp, int bt,
                  int c, int oc, DType type, DType grad_type, cudaStream_t stream) {
  if (!dweight) return;  // input gradient only (model/kernels.hpp)
  GemmShape dw;
  dw.m = oc;
  dw.n = c;
  dw.k = bt;
  dw.trans_a = true;  // dout is stored [BT,OC] = [k,m]
  dw.trans_b = false;
  dw.ab_type = type;
  dw.c_type = grad_type;
  gemm.run(dweight, dout, inp, nullptr, dw, 1.0f, 1.0f, stream);
  if (!dbias) return;
  const bool f32_grad = grad_type == DType::kF32;
  if (type == DType::kF32)
    bias_backward(static_cast<float*>(dbias), static_cast<const float*>(dout), bt, oc, stream);
  else if (f32_grad)
    bias_backward(static_cast<float*>(dbias), static_cast<const bf16*>(dout), bt, oc, stream);
  else
    bias_backward(static_cast<bf16*>(dbias), static_cast<const bf16*>(dout), bt, oc, stream);
}

void gelu(void* out, const void* inp, std::size_t n, DType type, cudaStream_t stream) {
  if (type == DType::kF32)
    gelu_forward(static_cast<float*>(out), static_cast<const float*>(inp), n, stream);
  else
    gelu_forward(static_cast<bf16*>(out), static_cast<const bf16*>(inp), n, stream);
}

void dgelu(void* dinp, const void* pre, std::size_t n, DType type, cudaStream_t stream) {
  if (type == DType::kF32)
    gelu_backward(static_cast<float*>(dinp), static_cast<const float*>(pre), static_cast<const float*>(dinp), n,
                  stream);
  else
    gelu_backward(static_cast<bf16*>(dinp), static_cast<const bf16*>(pre), static_cast<const bf16*>(dinp), n, stream);
}

}  // namespace

void matmul_forward(GemmRunner& gemm, void* out, const void* inp, const void* weight,
                    const void* bias, int bt, int c, int oc, DType type, cudaStream_t stream) {
  gemm.run(out, inp, weight, bias, forward_shape(bt, c, oc, type, bias != nullptr), 1.0f, 0.0f, stream);
}

void matmul_backward(GemmRunner& gemm, void* dinp, void* dweight, void* dbias, const void* dout,
                     const void* inp, const void* weight, int bt, int c, int oc, DType type,
                     DType grad_type, cudaStream_t stream) {
  if (dinp) gemm.run(dinp, dout, weight, nullptr, input_grad_shape(bt, c, oc, type), 1.0f, 0.0f, stream);
  weight_grads(gemm, dweight, dbias, dout, inp, bt, c, oc, type, grad_type, stream);
}

bool matmul_gelu_forward(GemmRunner& gemm, void* out, void* pre, const void* inp, const void* weight,
                         const void* bias, int bt, int c, int oc, DType type, bool fuse, cudaStream_t stream) {
  GemmShape s = forward_shape(bt, c, oc, type, bias != nullptr);
  s.epilogue = GemmEpilogue::kGelu;
  if (fuse && gemm.supports(out, inp, weight, bias, pre, s)) {
    gemm.run(out, inp, weight, bias, pre, s, 1.0f, 0.0f, stream);
    return true;
  }
  matmul_forward(gemm, pre, inp, weight, bias, bt, c, oc, type, stream);
  gelu(out, pre, static_cast<std::size_t>(bt) * oc, type, stream);
  return false;
}

bool matmul_dgelu_backward(GemmRunner& gemm, void* dpre, void* dweight, void* dbias, const void* dout,
                           const void* inp, const void* weight, const void* pre, int bt, int c, int oc,
                           DType type, DType grad_type, bool fuse, cudaStream_t stream) {
  GemmShape s = input_grad_shape(bt, c, oc, type);
  s.epilogue = GemmEpilogue::kDGelu;
  // cuBLASLt reads aux in the DGELU epilogue; the pointer is non-const in its API only.
  void* aux = const_cast<void*>(pre);
  const bool fused = fuse && gemm.supports(dpre, dout, weight, nullptr, aux, s);
  if (fused) {
    gemm.run(dpre, dout, weight, nullptr, aux, s, 1.0f, 0.0f, stream);
  } else {
    gemm.run(dpre, dout, weight, nullptr, input_grad_shape(bt, c, oc, type), 1.0f, 0.0f, stream);
    dgelu(dpre, pre, static_cast<std::size_t>(bt) * c, type, stream);
  }
  weight_grads(gemm, dweight, dbias, dout, inp, bt, c, oc, type, grad_type, stream);
  return fused;
}

}  // namespace holmes::cuda
