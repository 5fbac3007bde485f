// The linear layer of the model on GemmRunner, named and ordered like its CPU twin
// (outputs, inputs, sizes, stream). Shapes use the model legend: BT rows (batch * time),
// C input channels, OC output channels. `type` is the storage type of the activations and
// weights; `grad_type` that of the weight and bias gradients (fp32 under bf16 mixed
// precision: bf16 products accumulate into fp32 gradients inside cuBLASLt).
#pragma once

#include <cuda_runtime_api.h>

#include "cuda/gemm.hpp"

namespace holmes::cuda {

// out[BT,OC] = inp[BT,C] * weight[OC,C]^T + bias[OC]   (bias may be null)
void matmul_forward(GemmRunner& gemm, void* out, const void* inp, const void* weight,
                    const void* bias, int bt, int c, int oc, DType type,
                    cudaStream_t stream = nullptr);

// dinp[BT,C]     =  dout[BT,OC] * weight[OC,C]          (overwritten; dinp may be null)
// dweight[OC,C] +=  dout[BT,OC]^T * inp[BT,C]           (accumulated over micro-batches)
// dbias[OC]     +=  sum over BT of dout[BT,OC]          (dbias may be null; fixed order)
void matmul_backward(GemmRunner& gemm, void* dinp, void* dweight, void* dbias, const void* dout,
                     const void* inp, const void* weight, int bt, int c, int oc, DType type,
                     DType grad_type, cudaStream_t stream = nullptr);
inline void matmul_backward(GemmRunner& gemm, void* dinp, void* dweight, void* dbias, const void* dout,
                            const void* inp, const void* weight, int bt, int c, int oc, DType type,
                            cudaStream_t stream = nullptr) {
  matmul_backward(gemm, dinp, dweight, dbias, dout, inp, weight, bt, c, oc, type, type, stream);
}

// The MLP's first layer with its GELU: pre[BT,OC] = inp * weight^T + bias,
// out[BT,OC] = gelu(pre). One cuBLASLt call with the GELU_AUX_BIAS epilogue when `fuse` and
// cuBLASLt has an algorithm for it, else the GEMM and the GELU kernel. Returns whether it fused.
bool matmul_gelu_forward(GemmRunner& gemm, void* out, void* pre, const void* inp, const void* weight,
                         const void* bias, int bt, int c, int oc, DType type, bool fuse,
                         cudaStream_t stream = nullptr);

// The backward of a linear layer whose input is gelu(pre): dpre[BT,C] = (dout * weight) *
// gelu'(pre), one cuBLASLt call with the DGELU epilogue when `fuse` and supported (else
// the GEMM and the GELU backward kernel); dweight/dbias as in matmul_backward, inp =
// gelu(pre). Returns whether it fused.
bool matmul_dgelu_backward(GemmRunner& gemm, void* dpre, void* dweight, void* dbias, const void* dout,
                           const void* inp, const void* weight, const void* pre, int bt, int c, int oc,
                           DType type, DType grad_type, bool fuse, cudaStream_t stream = nullptr);

}  // namespace holmes::cuda
