// Targets that are not trained on (data.mask_document_start; model/kernels.hpp mask_losses /
// mask_rows): a target of -1 zeroes its loss and its row of the logits' gradient. One thread
// per row for the losses, one block per row for the gradient, where a block whose target counts
// returns at once (only masked rows are written). Deterministic. Asynchronous on `stream`.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace holmes::cuda {

// losses (N) writes 0 where targets[n] < 0.
void mask_losses(float* losses, const int* targets, int N, cudaStream_t stream = nullptr);
// The rows n of dlogits (N,Vl) with targets[n] < 0 write 0.
void mask_rows(float* dlogits, const int* targets, int N, int Vl, cudaStream_t stream = nullptr);
void mask_rows(__nv_bfloat16* dlogits, const int* targets, int N, int Vl, cudaStream_t stream = nullptr);

}  // namespace holmes::cuda
