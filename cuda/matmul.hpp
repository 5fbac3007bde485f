// The linear layer of the model on GemmRunner, named and ordered like its CPU twin
// (outputs, inputs, sizes, stream). Shapes use the model legend: BT rows (batch * time),
// C input channels, OC output channels. `type` is the storage type of every tensor here.
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
// dbias[OC]     +=  sum over BT of dout[BT,OC]          (dbias may be null)
void matmul_backward(GemmRunner& gemm, void* dinp, void* dweight, void* dbias, const void* dout,
                     const void* inp, const void* weight, int bt, int c, int oc, DType type,
                     cudaStream_t stream = nullptr);

}  // namespace holmes::cuda
