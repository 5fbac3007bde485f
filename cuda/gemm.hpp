// GemmRunner: row-major GEMMs on cuBLASLt, the matrix-multiply brick of the CUDA backend.
//
//   C[m,n] = alpha * op(A)[m,k] * op(B)[k,n] + beta * C[m,n]  (+ bias[n] on every row)
//
// All matrices are row-major, densely packed unless a leading dimension says otherwise (lda,
// ldb, ldc: elements between consecutive rows as stored; 0 = packed). A is stored [m,k], or [k,m] when trans_a;
// B is stored [k,n], or [n,k] when trans_b. The default (trans_b) is a linear layer:
// out[BT,OC] = inp[BT,C] * weight[OC,C]^T. Inputs are fp32, bf16 or FP8, accumulation is
// always fp32, C is fp32 or bf16. One cuBLASLt plan (descriptors + heuristic algorithm) is
// built per distinct shape and pointer alignment and cached, so steady-state calls do no
// set-up.
//
// FP8 (Hopper and newer; run_fp8): A and B are FP8 codes (E4M3 or E5M2, not both E5M2) cast
// with per-tensor scales, and the product is multiplied by the two inverse scales, read from
// device memory at run time (cuBLASLt's A/B_SCALE_POINTER), before alpha, beta and the bias:
//   C = alpha * (*a_scale_inv) * (*b_scale_inv) * A B^T + beta C (+ bias[n], bf16 C only).
// cuBLASLt's FP8 kernels on Hopper take only its "TN" layout, which for these row-major
// shapes is A stored [m,k] and B stored [n,k] (trans_a false, trans_b true): k contiguous in
// both; k a multiple of 16, every leading dimension a multiple of 16 bytes, batch 1, no GELU
// epilogue (validate_gemm says which rule a shape breaks; model::fp8_gemm_fits is the same
// rule for packed shapes).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "common/dtype.hpp"

namespace holmes::cuda {

using holmes::DType;  // common/dtype.hpp: the operand types
using holmes::dtype_bytes;
using holmes::dtype_name;
using holmes::is_fp8;
// What cuBLASLt applies to the product before storing C (with beta == 0):
//   kGelu   C = gelu(product + bias), and aux (same layout and type as C) = product + bias;
//   kDGelu  C = product * gelu'(aux), aux the pre-activation the forward stored.
// (GPT-2's tanh GELU in both.) cuBLASLt may offer no algorithm for an epilogue on some
// shapes or GPUs: run() then throws CudaError, and callers fall back to separate kernels.
enum class GemmEpilogue : std::uint8_t { kNone, kGelu, kDGelu };

struct GemmShape {
  int m = 0, n = 0, k = 0;
  bool trans_a = false;
  bool trans_b = true;
  DType ab_type = DType::kF32;  // A, and B unless b_type says otherwise
  std::optional<DType> b_type;  // B when it differs from A (FP8: E5M2 gradients x E4M3 weights)
  DType c_type = DType::kF32;   // C (and bias)
  bool bias = false;           // add bias[n] (c_type) to each row; needs batch == 1
  bool fast_tf32 = false;      // fp32 inputs only: let tensor cores round to TF32
  // FP8 only: cuBLASLt's fast accumulation (no periodic promotion of the tensor cores'
  // partial sums to fp32): faster, less accurate. Off unless asked for.
  bool fp8_fast_accum = false;
  GemmEpilogue epilogue = GemmEpilogue::kNone;  // needs batch == 1 and an aux pointer
  // Strided batches: matrix i of A starts at A + i*stride_a elements (same for B, C).
  int batch = 1;
  std::int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  // Row strides of the stored matrices (0 = packed: the stored row length). Lets a GEMM read
  // one head of an interleaved (T, 3C) buffer in place: lda = 3C, stride_a = HS.
  std::int64_t lda = 0, ldb = 0, ldc = 0;

  auto operator<=>(const GemmShape&) const = default;
};

// Throws std::invalid_argument naming the field, its value and what is accepted. These are
// programming errors of the caller (shapes come from the model), not user input.
void validate_gemm(const GemmShape& s);
DType b_type_of(const GemmShape& s);  // s.b_type, or s.ab_type when unset
std::string describe(const GemmShape& s);  // "m=.. n=.. k=.. A^T B ... bf16->f32"

// The stored row lengths of A, B, C ([rows, cols] as stored) and their effective leading
// dimensions (the ld fields, or the row length when 0).
std::int64_t stored_cols_a(const GemmShape& s);
std::int64_t stored_cols_b(const GemmShape& s);
std::int64_t effective_lda(const GemmShape& s);
std::int64_t effective_ldb(const GemmShape& s);
std::int64_t effective_ldc(const GemmShape& s);

// The dequantisation factors of FP8 operands: device pointers to one float each, the inverse
// of the scale each operand was cast with (cuda/fp8_cast.hpp writes them).
struct GemmScales {
  const float* a = nullptr;
  const float* b = nullptr;
};

class GemmRunner {
 public:
  static constexpr std::size_t kDefaultWorkspaceBytes = std::size_t{32} << 20;

  // The cuBLASLt handle and the workspace are made on first run(), on the device current at
  // that time; a runner then serves only that device. Constructing one needs no GPU.
  explicit GemmRunner(std::size_t workspace_bytes = kDefaultWorkspaceBytes);
  ~GemmRunner();
  GemmRunner(const GemmRunner&) = delete;
  GemmRunner& operator=(const GemmRunner&) = delete;

  // Device pointers; enqueued on `stream`, does not synchronize. `bias` is read only when
  // s.bias. The runner's one workspace is reused by every call, so calls on different
  // streams that may overlap need one runner each. Throws CudaError when cuBLASLt fails or offers
  // no algorithm for the problem.
  void run(void* c, const void* a, const void* b, const void* bias, const GemmShape& s, float alpha,
           float beta, cudaStream_t stream = nullptr) {
    run(c, a, b, bias, nullptr, s, alpha, beta, stream);
  }
  // The same with the epilogue's aux matrix (s.epilogue != kNone): written by kGelu, read by
  // kDGelu.
  void run(void* c, const void* a, const void* b, const void* bias, void* aux, const GemmShape& s,
           float alpha, float beta, cudaStream_t stream = nullptr);
  // An FP8 GEMM (s.ab_type FP8): `scales` must hold both inverse scales. Other shapes throw
  // std::invalid_argument here, as FP8 shapes do in run().
  void run_fp8(void* c, const void* a, const void* b, const void* bias, const GemmScales& scales,
               const GemmShape& s, float alpha, float beta, cudaStream_t stream = nullptr);

  // Whether cuBLASLt has an algorithm for s with these pointers' alignments: builds and
  // caches the plan (a later run() reuses it), and remembers a refusal, so asking again is
  // cheap. Only "no algorithm" / "not supported" answers false; other failures throw. An
  // epilogue whose aux leading dimension (ldc) is not a multiple of 8 answers false at once.
  bool supports(const void* c, const void* a, const void* b, const void* bias, const void* aux,
                const GemmShape& s);

  std::size_t cached_plans() const;

 private:
  void run_any(void* c, const void* a, const void* b, const void* bias, void* aux, const GemmScales& scales,
               const GemmShape& s, float alpha, float beta, cudaStream_t stream);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace holmes::cuda
