// GemmRunner on cuBLASLt. The row-major to column-major mapping is in gemm_layout.cpp.
#include "cuda/gemm.hpp"

#include <cublasLt.h>
#include <fmt/format.h>

#include <array>
#include <map>
#include <stdexcept>

#include "cuda/check.hpp"
#include "cuda/cublaslt_api.hpp"
#include "cuda/gemm_layout.hpp"
#include "cuda/device_buffer.hpp"

namespace holmes::cuda {

DType b_type_of(const GemmShape& s) { return s.b_type.value_or(s.ab_type); }

static cudaDataType_t to_cuda(DType t) {
  switch (t) {
    case DType::kF32: return CUDA_R_32F;
    case DType::kBf16: return CUDA_R_16BF;
    case DType::kE4M3: return CUDA_R_8F_E4M3;
    case DType::kE5M2: return CUDA_R_8F_E5M2;
  }
  return CUDA_R_32F;
}

namespace {

// The FP8 rules of cuBLASLt on Hopper (gemm.hpp). `bad` throws.
template <class Bad>
void validate_fp8(const GemmShape& s, Bad bad) {
  const DType b = b_type_of(s);
  if (!is_fp8(s.ab_type) || !is_fp8(b)) bad("an FP8 operand with a non-FP8 one", 1, "both A and B FP8, or neither");
  if (s.ab_type == DType::kE5M2 && b == DType::kE5M2) bad("e5m2 x e5m2", 1, "at least one e4m3 operand");
  if (s.trans_a || !s.trans_b)
    bad("trans_a / trans_b with FP8", s.trans_a * 2 + s.trans_b, "A [m,k] and B [n,k] as stored (trans_a false, trans_b true)");
  if (s.batch != 1) bad("batch with FP8", s.batch, "1");
  if (s.epilogue != GemmEpilogue::kNone) bad("a GELU epilogue with FP8", 1, "none");
  if (s.bias && s.c_type != DType::kBf16) bad("bias with FP8 and f32 C", 1, "a bias only with bf16 C");
  if (s.k % 16 != 0) bad("k with FP8", s.k, "a multiple of 16");
  if (effective_lda(s) % 16 != 0) bad("lda with FP8", effective_lda(s), "a multiple of 16");
  if (effective_ldb(s) % 16 != 0) bad("ldb with FP8", effective_ldb(s), "a multiple of 16");
  if (effective_ldc(s) * static_cast<std::int64_t>(dtype_bytes(s.c_type)) % 16 != 0)
    bad("ldc with FP8", effective_ldc(s), "a multiple of 16 bytes of C");
}

}  // namespace

void validate_gemm(const GemmShape& s) {
  auto bad = [&](const char* field, long long value, const char* accepted) {
    throw std::invalid_argument(
        fmt::format("GEMM {}: {} = {}; accepted: {}", describe(s), field, value, accepted));
  };
  if (s.m <= 0) bad("m", s.m, "> 0");
  if (s.n <= 0) bad("n", s.n, "> 0");
  if (s.k <= 0) bad("k", s.k, "> 0");
  if (s.batch <= 0) bad("batch", s.batch, "> 0");
  if (s.bias && s.batch != 1) bad("batch (with bias)", s.batch, "1 when bias is set");
  if (s.epilogue != GemmEpilogue::kNone && s.batch != 1) bad("batch (with a GELU epilogue)", s.batch, "1");
  if (s.epilogue == GemmEpilogue::kDGelu && s.bias) bad("bias (with the dGELU epilogue)", 1, "none");
  if (is_fp8(s.c_type)) bad("c_type FP8", 1, "f32 or bf16");
  if (is_fp8(s.ab_type) || is_fp8(b_type_of(s))) validate_fp8(s, bad);
  else if (b_type_of(s) != s.ab_type) bad("b_type different from ab_type", 1, "the same type unless both are FP8");
  if (s.fp8_fast_accum && !is_fp8(s.ab_type)) bad("fp8_fast_accum without FP8", 1, "FP8 operands only");
  // cuBLASLt's fp32-compute GEMMs write bf16 only from bf16 inputs (it answers NOT_SUPPORTED).
  if (s.ab_type == DType::kF32 && s.c_type == DType::kBf16)
    bad("c_type bf16 with f32 inputs", 1, "f32 inputs write f32; bf16 inputs write bf16 or f32");
  if (s.fast_tf32 && s.ab_type != DType::kF32)
    bad("fast_tf32 with non-f32 inputs", 1, "f32 inputs only");
  if (s.lda != 0 && s.lda < stored_cols_a(s)) bad("lda", s.lda, "0 (packed) or >= A's stored row length");
  if (s.ldb != 0 && s.ldb < stored_cols_b(s)) bad("ldb", s.ldb, "0 (packed) or >= B's stored row length");
  if (s.ldc != 0 && s.ldc < s.n) bad("ldc", s.ldc, "0 (packed) or >= n");
  if (s.batch > 1) {
    // Batches may not overlap in the output; inputs may be shared (stride 0, broadcast).
    // Output matrices either follow each other (stride_c covers a whole matrix) or sit side
    // by side in the columns of wider rows (stride_c >= n and the last one ends within ldc).
    const std::int64_t ldc = effective_ldc(s);
    const bool disjoint = s.stride_c >= (std::int64_t{s.m} - 1) * ldc + s.n;
    const bool side_by_side = s.stride_c >= s.n && (s.batch - 1) * s.stride_c + s.n <= ldc;
    if (!disjoint && !side_by_side)
      bad("stride_c", s.stride_c, ">= (m-1)*ldc + n, or >= n with all batches within ldc");
    if (s.stride_a < 0) bad("stride_a", s.stride_a, ">= 0");
    if (s.stride_b < 0) bad("stride_b", s.stride_b, ">= 0");
  }
}

std::int64_t stored_cols_a(const GemmShape& s) { return s.trans_a ? s.m : s.k; }
std::int64_t stored_cols_b(const GemmShape& s) { return s.trans_b ? s.k : s.n; }
std::int64_t effective_lda(const GemmShape& s) { return s.lda ? s.lda : stored_cols_a(s); }
std::int64_t effective_ldb(const GemmShape& s) { return s.ldb ? s.ldb : stored_cols_b(s); }
std::int64_t effective_ldc(const GemmShape& s) { return s.ldc ? s.ldc : s.n; }

std::string describe(const GemmShape& s) {
  const char* epilogue = s.epilogue == GemmEpilogue::kGelu ? " +gelu" : s.epilogue == GemmEpilogue::kDGelu ? " *dgelu" : "";
  const std::string ab = b_type_of(s) == s.ab_type ? dtype_name(s.ab_type)
                                                    : fmt::format("{}x{}", dtype_name(s.ab_type), dtype_name(b_type_of(s)));
  return fmt::format("m={} n={} k={} {}{} {}->{}{}{}{}{}", s.m, s.n, s.k, s.trans_a ? "A^T" : "A",
                     s.trans_b ? "B^T" : "B", ab, dtype_name(s.c_type),
                     s.bias ? " +bias" : "", epilogue, s.batch > 1 ? fmt::format(" batch={}", s.batch) : "",
                     (s.lda || s.ldb || s.ldc)
                         ? fmt::format(" ld={},{},{}", effective_lda(s), effective_ldb(s), effective_ldc(s))
                         : "");
}

namespace {

// Largest power of two (<= 256, cuBLASLt's default assumption) dividing the address; the
// heuristic must know it or it may pick a vectorized kernel that faults on offset pointers.
std::uint32_t alignment_of(const void* p) {
  auto addr = reinterpret_cast<std::uintptr_t>(p);
  std::uint32_t a = 256;
  while (a > 1 && addr % a != 0) a /= 2;
  return a;
}

struct PlanKey {
  GemmShape shape;
  std::array<std::uint32_t, 5> align;  // A, B, C, bias, aux (bytes)
  auto operator<=>(const PlanKey&) const = default;
};

// Descriptors and the chosen algorithm of one problem. Owns the cuBLASLt objects.
struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t lt_a = nullptr, lt_b = nullptr, lt_c = nullptr;
  cublasLtMatmulAlgo_t algo{};

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (lt_c) cublaslt().matrix_layout_destroy(lt_c);
    if (lt_b) cublaslt().matrix_layout_destroy(lt_b);
    if (lt_a) cublaslt().matrix_layout_destroy(lt_a);
    if (op) cublaslt().matmul_desc_destroy(op);
  }
};

template <class T>
void set_op(cublasLtMatmulDesc_t op, cublasLtMatmulDescAttributes_t attr, const T& value) {
  HOLMES_CUBLAS_CHECK(cublaslt().matmul_desc_set_attribute(op, attr, &value, sizeof(value)));
}

// A dense column-major layout of one operand, optionally batched.
cublasLtMatrixLayout_t make_layout(DType t, const LtOperand& o, int batch) {
  cublasLtMatrixLayout_t layout = nullptr;
  HOLMES_CUBLAS_CHECK(cublaslt().matrix_layout_create(&layout, to_cuda(t), o.rows, o.cols, o.ld));
  if (batch > 1) {
    std::int32_t count = batch;
    HOLMES_CUBLAS_CHECK(cublaslt().matrix_layout_set_attribute(
        layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
    HOLMES_CUBLAS_CHECK(
        cublaslt().matrix_layout_set_attribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                               &o.batch_stride, sizeof(o.batch_stride)));
  }
  return layout;
}

}  // namespace

struct GemmRunner::Impl {
  std::size_t workspace_bytes;
  cublasLtHandle_t handle = nullptr;
  int device = -1;
  DeviceBuffer workspace;
  std::map<PlanKey, std::unique_ptr<Plan>> plans;
  std::map<PlanKey, bool> refused;  // keys cuBLASLt has no algorithm for

  ~Impl() {
    plans.clear();
    if (handle) cublaslt().destroy(handle);
  }

  void ensure_ready() {
    int current = 0;
    HOLMES_CUDA_CHECK(cudaGetDevice(&current));
    if (handle) {
      if (current != device)
        throw std::logic_error(fmt::format(
            "GemmRunner made for GPU {} used while GPU {} is current; use one runner per GPU",
            device, current));
      return;
    }
    HOLMES_CUBLAS_CHECK(cublaslt().create(&handle));
    device = current;
    workspace = DeviceBuffer(workspace_bytes);
  }

  std::unique_ptr<Plan> make_plan(const PlanKey& key, const void* bias, const void* aux, const GemmScales& scales);
};

std::unique_ptr<Plan> GemmRunner::Impl::make_plan(const PlanKey& key, const void* bias, const void* aux,
                                                  const GemmScales& scales) {
  const GemmShape& s = key.shape;
  auto plan = std::make_unique<Plan>();
  cublasComputeType_t compute = s.fast_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  HOLMES_CUBLAS_CHECK(cublaslt().matmul_desc_create(&plan->op, compute, CUDA_R_32F));
  const LtProblem lt = to_column_major(s);  // cuBLASLt's A is our B, its B our A
  set_op(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, lt.lt_a.transposed ? CUBLAS_OP_T : CUBLAS_OP_N);
  set_op(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, lt.lt_b.transposed ? CUBLAS_OP_T : CUBLAS_OP_N);
  // Bias type left at its default, the type of C (c_type), as gemm.hpp promises; the aux
  // matrix has C's type and C's column-major layout (leading dimension = rows of C there).
  cublasLtEpilogue_t epilogue = s.bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  if (s.epilogue == GemmEpilogue::kGelu) epilogue = s.bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
  if (s.epilogue == GemmEpilogue::kDGelu) epilogue = CUBLASLT_EPILOGUE_DGELU;
  if (epilogue != CUBLASLT_EPILOGUE_DEFAULT) set_op(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue);
  if (s.bias) set_op(plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  if (s.epilogue != GemmEpilogue::kNone) {
    const std::int64_t aux_ld = lt.lt_c.ld;
    set_op(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, aux_ld);
    // Like the bias pointer, the heuristic reads the aux pointer's alignment from its value:
    // left NULL it would assume any alignment and may pick a kernel that faults on ours.
    set_op(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux);
  }
  if (is_fp8(s.ab_type)) {
    // cuBLASLt's A is our B: its A scale is our B's. The pointers are set again before every
    // call (run_any); here they only make the descriptor complete for the heuristic.
    set_op(plan->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, static_cast<const void*>(scales.b));
    set_op(plan->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, static_cast<const void*>(scales.a));
    const std::int8_t fast = s.fp8_fast_accum ? 1 : 0;
    set_op(plan->op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, fast);
  }
  plan->lt_a = make_layout(b_type_of(s), lt.lt_a, s.batch);
  plan->lt_b = make_layout(s.ab_type, lt.lt_b, s.batch);
  plan->lt_c = make_layout(s.c_type, lt.lt_c, s.batch);

  cublasLtMatmulPreference_t pref = nullptr;
  HOLMES_CUBLAS_CHECK(cublaslt().preference_create(&pref));
  // Keyed alignments in cuBLASLt's slot order: its A is our B, its B our A.
  const std::uint32_t align[4] = {key.align[1], key.align[0], key.align[2], key.align[2]};
  const cublasLtMatmulPreferenceAttributes_t align_attr[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasStatus_t status = cublaslt().preference_set_attribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes, sizeof(workspace_bytes));
  for (int i = 0; i < 4 && status == CUBLAS_STATUS_SUCCESS; ++i)
    status = cublaslt().preference_set_attribute(pref, align_attr[i], &align[i], sizeof(align[i]));
  if (status == CUBLAS_STATUS_SUCCESS)
    status = cublaslt().algo_get_heuristic(handle, plan->op, plan->lt_a, plan->lt_b, plan->lt_c,
                                           plan->lt_c, pref, 1, &result, &found);
  cublaslt().preference_destroy(pref);
  HOLMES_CUBLAS_CHECK(status);
  if (found == 0)
    throw CudaError("CUBLAS_STATUS_NOT_SUPPORTED",
                    fmt::format("no cuBLASLt algorithm for {} (alignments A={} B={} C={} bytes)",
                                describe(s), key.align[0], key.align[1], key.align[2]),
                    "cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__);
  plan->algo = result.algo;
  return plan;
}

GemmRunner::GemmRunner(std::size_t workspace_bytes) : impl_(std::make_unique<Impl>()) {
  impl_->workspace_bytes = workspace_bytes;
}

GemmRunner::~GemmRunner() = default;

std::size_t GemmRunner::cached_plans() const { return impl_->plans.size(); }

namespace {

PlanKey key_of(const void* c, const void* a, const void* b, const void* bias, const void* aux, const GemmShape& s) {
  return {s,
          {alignment_of(a), alignment_of(b), alignment_of(c), s.bias ? alignment_of(bias) : 256u,
           s.epilogue != GemmEpilogue::kNone ? alignment_of(aux) : 256u}};
}

}  // namespace

bool GemmRunner::supports(const void* c, const void* a, const void* b, const void* bias, const void* aux,
                          const GemmShape& s) {
  validate_gemm(s);
  // cuBLASLt requires the GELU aux matrix's leading dimension (C's, in elements) to be a
  // multiple of 8 (cublasLt.h); it may refuse others as an invalid value, which supports()
  // would throw, rather than as "no algorithm".
  if (s.epilogue != GemmEpilogue::kNone && effective_ldc(s) % 8 != 0) return false;
  impl_->ensure_ready();
  const PlanKey key = key_of(c, a, b, bias, aux, s);
  if (impl_->plans.count(key)) return true;
  if (impl_->refused.count(key)) return false;
  try {
    impl_->plans.emplace(key, impl_->make_plan(key, bias, aux, GemmScales{}));
    return true;
  } catch (const CudaError& e) {
    if (e.code_name() != "CUBLAS_STATUS_NOT_SUPPORTED") throw;
    impl_->refused.emplace(key, true);
    return false;
  }
}

void GemmRunner::run(void* c, const void* a, const void* b, const void* bias, void* aux, const GemmShape& s,
                     float alpha, float beta, cudaStream_t stream) {
  if (is_fp8(s.ab_type))
    throw std::invalid_argument(fmt::format("GEMM {}: FP8 operands need their scales: use run_fp8", describe(s)));
  run_any(c, a, b, bias, aux, GemmScales{}, s, alpha, beta, stream);
}

void GemmRunner::run_fp8(void* c, const void* a, const void* b, const void* bias, const GemmScales& scales,
                         const GemmShape& s, float alpha, float beta, cudaStream_t stream) {
  if (!is_fp8(s.ab_type))
    throw std::invalid_argument(fmt::format("GEMM {}: run_fp8 takes FP8 operands; accepted: e4m3, e5m2", describe(s)));
  if (!scales.a || !scales.b)
    throw std::invalid_argument(fmt::format("GEMM {}: null FP8 scale pointer (a={} b={})", describe(s),
                                            static_cast<const void*>(scales.a), static_cast<const void*>(scales.b)));
  run_any(c, a, b, bias, nullptr, scales, s, alpha, beta, stream);
}

void GemmRunner::run_any(void* c, const void* a, const void* b, const void* bias, void* aux, const GemmScales& scales,
                         const GemmShape& s, float alpha, float beta, cudaStream_t stream) {
  validate_gemm(s);
  const bool needs_aux = s.epilogue != GemmEpilogue::kNone;
  if (!a || !b || !c || (s.bias && !bias) || (needs_aux && !aux))
    throw std::invalid_argument(fmt::format("GEMM {}: null device pointer (a={} b={} c={} bias={} aux={})",
                                            describe(s), a, b, c, bias, aux));
  impl_->ensure_ready();
  const PlanKey key = key_of(c, a, b, bias, aux, s);
  auto it = impl_->plans.find(key);
  if (it == impl_->plans.end()) it = impl_->plans.emplace(key, impl_->make_plan(key, bias, aux, scales)).first;
  Plan& plan = *it->second;
  // The bias, aux and scale pointers live in the (shared, cached) descriptor: set them for
  // this call (cuBLASLt's A is our B).
  if (s.bias) set_op(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  if (needs_aux) set_op(plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux);
  if (is_fp8(s.ab_type)) {
    set_op(plan.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, static_cast<const void*>(scales.b));
    set_op(plan.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, static_cast<const void*>(scales.a));
  }
  HOLMES_CUBLAS_CHECK(cublaslt().matmul(impl_->handle, plan.op, &alpha, b, plan.lt_a, a, plan.lt_b,
                                        &beta, c, plan.lt_c, c, plan.lt_c, &plan.algo,
                                        impl_->workspace.data(), impl_->workspace.bytes(), stream));
}

}  // namespace holmes::cuda
