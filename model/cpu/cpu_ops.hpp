// The CPU ops as free functions (argument conventions of model/kernels.hpp); CpuKernels in
// cpu_kernels.cpp forwards to them. One file per op family, named as its CUDA twin in cuda/:
// matmul, layernorm, attention, pointwise (GELU, residual), vocab (embedding, cross-entropy),
// optimizer (AdamW, sum of squares, mean, scale), and Llama's rmsnorm, rope, swiglu.
#pragma once

#include <cstddef>

#include "model/kernels.hpp"

namespace holmes::model::cpu {

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int N,
                    int C, int OC);
void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int N, int C, int OC);
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int N, int C);
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean, const float* rstd,
                        int N, int C);

void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int N, int C,
                     float eps);
void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                      const float* weight, const float* rstd, int N, int C);

// pos (B,T): document positions (kernels.hpp: document masking); nullptr = causal only.
void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH, int KVH,
                       const int* pos = nullptr);
void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                        const float* att, int B, int T, int C, int NH, int KVH);
void rope_forward(float* out, const float* inp, const float* cos_sin, int B, int T, int H, int HS,
                  int stride, const int* pos = nullptr);
void rope_backward(float* dinp, const float* dout, const float* cos_sin, int B, int T, int H, int HS,
                   int stride, const int* pos = nullptr);
void swiglu_forward(float* out, const float* inp, int N, int F);
void swiglu_backward(float* dinp, const float* inp, const float* dout, int N, int F);

void embedding_forward(float* out, const int* tokens, const float* wte, const float* wpe, int B,
                       int T, int C, int vocab_begin, int Vl, const int* pos = nullptr);
void embedding_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, int B,
                        int T, int C, int vocab_begin, int Vl, const int* pos = nullptr);
void gelu_forward(float* out, const float* inp, size_t n);
void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n);
void residual_forward(float* out, const float* a, const float* b, size_t n);
void residual_backward(float* da, float* db, const float* dout, size_t n);
void crossentropy_max_forward(float* row_max, const float* logits, int N, int Vl, int vocab_begin,
                              int V);
void crossentropy_stats_forward(float* stats, const float* logits, const float* row_max,
                                const int* targets, int N, int Vl, int vocab_begin, int V);
void crossentropy_forward(float* losses, const float* stats, const float* row_max, int N);
void crossentropy_backward(float* dlogits, const float* logits, const float* row_max,
                           const float* stats, const int* targets, float dloss, int N, int Vl,
                           int vocab_begin, int V);

void mask_losses(float* losses, const int* targets, int N);
void mask_rows(float* dlogits, const int* targets, int N, int Vl);

void mean_forward(float* mean, const float* x, int N);
void scale_forward(float* x, float s, size_t n);
void sum_squares_forward(double* sq, const float* x, size_t n);
void adamw_update(float* params, float* m, float* v, const float* grads, size_t n, const AdamWStep& s);

}  // namespace holmes::model::cpu
