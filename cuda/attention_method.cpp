// holmes::cuda::Attention (attention.hpp): the choice of method and the fallback method's
// GEMMs. The exact kernels are in attention.cu, the fallback's row kernels in
// attention_softmax.cu, the cuDNN graphs in cudnn_sdpa.cpp.
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include "common/errors.hpp"
#include "cuda/attention.hpp"
#include "cuda/attention_softmax.hpp"
#include "cuda/cudnn_api.hpp"
#include "cuda/cudnn_sdpa.hpp"
#include "cuda/gemm.hpp"

namespace holmes::cuda {

namespace {

template <class T>
constexpr DType dtype_of() {
  return sizeof(T) == 4 ? DType::kF32 : DType::kBf16;
}

// One strided batch of per-head GEMMs for each of the B sequences: matrix i of operand X
// starts at x + b * x_seq + i * (stride in the shape).
struct HeadGemm {
  GemmShape shape;
  std::int64_t a_seq, b_seq, c_seq;
};

template <class C, class A, class B>
void run_per_sequence(GemmRunner& gemm, const HeadGemm& g, int batches, C* c, const A* a,
                      const B* b, float alpha, float beta, cudaStream_t stream) {
  for (int i = 0; i < batches; ++i)
    gemm.run(c + i * g.c_seq, a + i * g.a_seq, b + i * g.b_seq, nullptr, g.shape, alpha, beta,
             stream);
}

// A batch of `batch` GEMMs [m,k] x [k,n] with the given layouts (see HeadGemm).
GemmShape head_shape(int m, int n, int k, bool ta, bool tb, DType ab, DType c, int batch,
                     std::int64_t lda, std::int64_t ldb, std::int64_t ldc, std::int64_t sa,
                     std::int64_t sb, std::int64_t sc) {
  GemmShape s;
  s.m = m, s.n = n, s.k = k, s.trans_a = ta, s.trans_b = tb, s.ab_type = ab, s.c_type = c;
  s.batch = batch, s.lda = lda, s.ldb = ldb, s.ldc = ldc, s.stride_a = sa, s.stride_b = sb;
  s.stride_c = sc;
  return s;
}

// Where the heads live. Query head h = g * G + j (G = NH / KVH) reads key/value head g; for a
// fixed j, the query heads g * G + j of all KVH groups are one strided batch (stride G heads)
// against the KVH key/value heads (stride one head), so G batches of KVH GEMMs cover the NH
// heads (G = 1: one batch of NH, as without grouping).
struct HeadLayout {
  std::int64_t HS, G, KVH, row, TT, k_at, v_at, C;
  HeadLayout(int Tn, int C_, int NH, int KVH_)
      : HS(C_ / NH), G(NH / KVH_), KVH(KVH_), row((NH + 2 * std::int64_t{KVH_}) * (C_ / NH)),
        TT(std::int64_t{Tn} * Tn), k_at(C_), v_at(C_ + std::int64_t{KVH_} * (C_ / NH)), C(C_) {}
};

// The fallback forward: att = softmax(Q K^T * scale) (probabilities, type T), out = att V.
template <class T>
void fallback_forward(GemmRunner& gemm, T* out, T* att, const T* qkv, const int* pos, int B, int Tn, int C,
                      int NH, int KVH, cudaStream_t stream) {
  const HeadLayout h(Tn, C, NH, KVH);
  const DType t = dtype_of<T>();
  const float scale = 1.0f / std::sqrt(float(h.HS));
  const int kv = int(h.KVH);
  HeadGemm scores{head_shape(Tn, Tn, h.HS, false, true, t, t, kv, h.row, h.row, 0, h.G * h.HS, h.HS,
                             h.G * h.TT),
                  Tn * h.row, Tn * h.row, NH * h.TT};
  for (std::int64_t j = 0; j < h.G; ++j)
    run_per_sequence(gemm, scores, B, att + j * h.TT, qkv + j * h.HS, qkv + h.k_at, scale, 0.0f, stream);
  if (pos != nullptr)
    document_softmax_forward(att, pos, std::int64_t{B} * NH * Tn, Tn, NH, stream);
  else
    causal_softmax_forward(att, std::int64_t{B} * NH * Tn, Tn, stream);
  HeadGemm pv{head_shape(Tn, h.HS, Tn, false, false, t, t, kv, 0, h.row, C, h.G * h.TT, h.HS,
                         h.G * h.HS),
              NH * h.TT, Tn * h.row, std::int64_t{Tn} * C};
  for (std::int64_t j = 0; j < h.G; ++j)
    run_per_sequence(gemm, pv, B, out + j * h.HS, att + j * h.TT, qkv + h.v_at, 1.0f, 0.0f, stream);
}

// The fallback backward: dV = P^T dO, dP = dO V^T (fp32), dS = softmax backward * scale,
// dQ = dS K, dK = dS^T Q; dK and dV sum the G query heads of their group in order (beta = 1
// after the first). dp holds B*NH*T*T floats; ds may alias dp when T is float.
template <class T>
void fallback_backward(GemmRunner& gemm, T* dqkv, float* dp, T* ds, const T* dout, const T* qkv,
                       const T* att, int B, int Tn, int C, int NH, int KVH, cudaStream_t stream) {
  const HeadLayout h(Tn, C, NH, KVH);
  const std::int64_t seq = Tn * h.row, oseq = std::int64_t{Tn} * C, pseq = NH * h.TT;
  const DType t = dtype_of<T>();
  const float scale = 1.0f / std::sqrt(float(h.HS));
  const int kv = int(h.KVH);
  const std::int64_t sp = h.G * h.TT, sq = h.G * h.HS;  // batch strides over groups
  HeadGemm dv{head_shape(Tn, h.HS, Tn, true, false, t, t, kv, 0, C, h.row, sp, sq, h.HS), pseq, oseq, seq};
  HeadGemm dprob{head_shape(Tn, Tn, h.HS, false, true, t, DType::kF32, kv, C, h.row, 0, sq, h.HS, sp),
                 oseq, seq, pseq};
  for (std::int64_t j = 0; j < h.G; ++j) {
    run_per_sequence(gemm, dv, B, dqkv + h.v_at, att + j * h.TT, dout + j * h.HS, 1.0f, j ? 1.0f : 0.0f, stream);
    run_per_sequence(gemm, dprob, B, dp + j * h.TT, dout + j * h.HS, qkv + h.v_at, 1.0f, 0.0f, stream);
  }
  causal_softmax_backward(ds, dp, att, scale, std::int64_t{B} * NH * Tn, Tn, stream);
  HeadGemm dq{head_shape(Tn, h.HS, Tn, false, false, t, t, kv, 0, h.row, h.row, sp, h.HS, sq), pseq, seq, seq};
  HeadGemm dk{head_shape(Tn, h.HS, Tn, true, false, t, t, kv, 0, h.row, h.row, sp, sq, h.HS), pseq, seq, seq};
  for (std::int64_t j = 0; j < h.G; ++j) {
    run_per_sequence(gemm, dq, B, dqkv + j * h.HS, ds + j * h.TT, qkv + h.k_at, 1.0f, 0.0f, stream);
    run_per_sequence(gemm, dk, B, dqkv + h.k_at, ds + j * h.TT, qkv + j * h.HS, 1.0f, j ? 1.0f : 0.0f, stream);
  }
}

std::string method_line(AttentionMethod m, DType p, const std::string& why_not_cudnn) {
  switch (m) {
    case AttentionMethod::kCudnn:
      return fmt::format("cudnn: cuDNN {} fused flash attention, {} (softmax statistics kept)",
                         cudnn_version(), cudnn_path());
    case AttentionMethod::kFallback:
      return fmt::format("fallback: cuBLASLt QK^T/PV + softmax kernel, {} probabilities kept{}",
                         dtype_name(p),
                         why_not_cudnn.empty() ? "" : " (cuDNN: " + why_not_cudnn + ")");
    default:
      return "exact: fp32 reference kernels, probabilities kept (B,NH,T,T)";
  }
}

}  // namespace

struct Attention::Impl {
  cudaStream_t stream;
  Method force;
  GemmRunner gemm;
  CudnnSdpa sdpa;
  Method planned[2] = {Method::kAuto, Method::kAuto};  // by precision
  int max_B[2] = {0, 0}, max_T[2] = {0, 0};

  Method& of(DType p) { return planned[p == DType::kBf16]; }

  // "" when cuDNN serves both directions of this shape, else why not.
  std::string cudnn_reason(int B, int T, int C, int NH, int KVH) {
    std::string why = sdpa.prepare(false, B, T, C, NH, KVH);
    if (why.empty()) why = sdpa.prepare(true, B, T, C, NH, KVH);
    return why;
  }

  void check_planned(DType p, int B, int T, const char* op) {
    const int i = p == DType::kBf16;
    if (planned[i] == Method::kAuto)
      throw std::logic_error(fmt::format("Attention::{} in {} before plan() for that precision", op,
                                         dtype_name(p)));
    if (B > max_B[i] || T > max_T[i])
      throw std::logic_error(fmt::format("Attention::{}: B={} T={} exceeds the planned B={} T={}",
                                         op, B, T, max_B[i], max_T[i]));
  }
};

Attention::Attention(cudaStream_t stream, Method force) : impl_(std::make_unique<Impl>()) {
  impl_->stream = stream;
  impl_->force = force;
}

Attention::~Attention() = default;

Attention::Method Attention::method(DType p) const {
  return impl_->planned[p == DType::kBf16];
}

model::AttentionPlan Attention::plan(DType p, int B, int T, int C, int NH, int KVH, bool document_mask) {
  validate_attention_shape(B, T, C, NH, KVH);
  Method m = impl_->force;
  const char* source = "the caller";
  if (m == Method::kAuto) {
    if (auto env = parse_attention_env(std::getenv("HOLMES_ATTENTION"))) {
      m = *env;
      source = "HOLMES_ATTENTION";
    }
  }
  auto refuse = [&](const std::string& why) {
    throw UserError(fmt::format("attention method {} (forced by {}) cannot run {} B={} T={} C={} "
                                "NH={} KVH={}: {}",
                                attention_method_name(m), source, dtype_name(p), B, T,
                                C, NH, KVH, why));
  };
  std::string why_not_cudnn;
  if (m == Method::kAuto) {
    if (p == DType::kF32) {
      // cuBLASLt's fp32 GEMMs instead of the exact kernels' one warp per query row: far
      // faster at T = 1024 (docs/cuda.md), within the same 1e-5 of the CPU twin.
      m = Method::kFallback;
    } else if (document_mask) {
      why_not_cudnn = "document masking needs a per-token mask, which this library's cuDNN graph has not";
      m = Method::kFallback;
    } else {
      why_not_cudnn = impl_->cudnn_reason(B, T, C, NH, KVH);
      m = why_not_cudnn.empty() ? Method::kCudnn : Method::kFallback;
    }
  } else if (m == Method::kCudnn) {
    if (p != DType::kBf16) refuse("cuDNN fused attention is bf16 only; use fallback or exact");
    if (document_mask) refuse("data.document_mask needs a per-token mask, which this library's cuDNN graph has not; "
                              "use fallback");
    if (std::string why = impl_->cudnn_reason(B, T, C, NH, KVH); !why.empty()) refuse(why);
  } else if (m == Method::kExact && p != DType::kF32) {
    refuse("the exact kernels are fp32 only; use cudnn or fallback");
  }
  impl_->of(p) = m;
  impl_->max_B[p == DType::kBf16] = B;
  impl_->max_T[p == DType::kBf16] = T;
  const AttentionSizes sizes = attention_sizes(m, p, B, T, NH);
  return {sizes.state_floats, sizes.scratch_floats, method_line(m, p, why_not_cudnn), m != Method::kCudnn};
}

void Attention::forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH, int KVH,
                        const int* pos) {
  impl_->check_planned(DType::kF32, B, T, "forward");
  if (impl_->of(DType::kF32) == Method::kFallback)
    fallback_forward(impl_->gemm, out, att, qkv, pos, B, T, C, NH, KVH, impl_->stream);
  else
    attention_forward(out, att, qkv, pos, B, T, C, NH, KVH, impl_->stream);
}

void Attention::forward(bf16* out, float* att, const bf16* qkv, int B, int T, int C, int NH, int KVH,
                        const int* pos) {
  impl_->check_planned(DType::kBf16, B, T, "forward");
  if (impl_->of(DType::kBf16) == Method::kCudnn) {
    if (pos != nullptr)  // plan(document_mask) keeps a masked model off cuDNN
      throw std::logic_error("Attention::forward: document positions for the cudnn method");
    impl_->sdpa.forward(out, att, qkv, B, T, C, NH, KVH, impl_->stream);
  } else {
    fallback_forward(impl_->gemm, out, reinterpret_cast<bf16*>(att), qkv, pos, B, T, C, NH, KVH,
                     impl_->stream);
  }
}

// The backwards read only the probabilities the forward kept, 0 outside each document's block:
// they need no positions (the cudnn method, which keeps none, never sees masked micro-batches).
void Attention::backward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                         const float* /*out*/, const float* att, int B, int T, int C, int NH, int KVH,
                         const int* /*pos*/) {
  impl_->check_planned(DType::kF32, B, T, "backward");
  if (impl_->of(DType::kF32) == Method::kFallback)
    fallback_backward(impl_->gemm, dqkv, scratch, scratch, dout, qkv, att, B, T, C, NH, KVH,
                      impl_->stream);
  else
    attention_backward(dqkv, scratch, dout, qkv, att, B, T, C, NH, KVH, impl_->stream);
}

void Attention::backward(bf16* dqkv, float* scratch, const bf16* dout, const bf16* qkv,
                         const bf16* out, const float* att, int B, int T, int C, int NH, int KVH, const int* pos) {
  impl_->check_planned(DType::kBf16, B, T, "backward");
  if (impl_->of(DType::kBf16) == Method::kCudnn) {
    if (pos != nullptr) throw std::logic_error("Attention::backward: document positions for the cudnn method");
    impl_->sdpa.backward(dqkv, dout, qkv, out, att, B, T, C, NH, KVH, impl_->stream);
    return;
  }
  // scratch: dP fp32 (B,NH,T,T), then dS bf16 (B,NH,T,T).
  float* dp = scratch;
  bf16* ds = reinterpret_cast<bf16*>(scratch + std::size_t(B) * NH * T * T);
  fallback_backward(impl_->gemm, dqkv, dp, ds, dout, qkv, reinterpret_cast<const bf16*>(att), B,
                    T, C, NH, KVH, impl_->stream);
}

}  // namespace holmes::cuda
