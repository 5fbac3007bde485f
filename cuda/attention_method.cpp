// holmes::cuda::Attention (attention.hpp): the choice of method and the fallback method's
// GEMMs. The exact kernels are in attention.cu, the fallback's row kernels in
// attention_softmax.cu, the cuDNN graphs in cudnn_sdpa.cpp.
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include "common/errors.hpp"
#include "cuda/attention.hpp"
#include "cuda/attention_bias.hpp"
#include "cuda/attention_softmax.hpp"
#include "cuda/check.hpp"
#include "cuda/cudnn_api.hpp"
#include "cuda/cudnn_sdpa.hpp"
#include "cuda/device_buffer.hpp"
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

// document: the mask of masked micro-batches (kCausal when the plan has none); bias_bytes the
// bias buffer of kDocumentBias.
std::string method_line(AttentionMethod m, DType p, const std::string& why_not_cudnn, SdpaMask document,
                        std::size_t bias_bytes) {
  switch (m) {
    case AttentionMethod::kCudnn:
      return fmt::format("cudnn: cuDNN {} fused flash attention, {} (softmax statistics kept){}", cudnn_version(),
                         cudnn_path(),
                         document == SdpaMask::kDocumentBound ? "; documents masked in the graph from positions"
                         : document == SdpaMask::kDocumentBias
                             ? fmt::format("; documents masked by a bf16 bias (B,T,T), {:.1f} MiB", bias_bytes / 1048576.0)
                             : std::string());
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
  // The cudnn method's graph for micro-batches with positions (kCausal: the plan had no
  // document mask, and positions are refused), and the bias of kDocumentBias (B,T,T) bf16,
  // rebuilt from the positions by every forward and backward (the micro-batch may change
  // between them), one for all heads and layers.
  SdpaMask document = SdpaMask::kCausal;
  DeviceBuffer bias;

  Method& of(DType p) { return planned[p == DType::kBf16]; }

  // "" when cuDNN serves both directions of this shape with `mask`, else why not.
  std::string cudnn_reason(int B, int T, int C, int NH, int KVH, SdpaMask mask = SdpaMask::kCausal) {
    std::string why = sdpa.prepare(false, B, T, C, NH, KVH, mask);
    if (why.empty()) why = sdpa.prepare(true, B, T, C, NH, KVH, mask);
    return why;
  }

  // The first document mask cuDNN serves for this shape (kDocumentBound, which needs no memory,
  // then kDocumentBias), with the causal graph for micro-batches without positions; kCausal
  // and why not when none.
  SdpaMask document_mask_for(int B, int T, int C, int NH, int KVH, std::string& why) {
    why = cudnn_reason(B, T, C, NH, KVH);
    if (!why.empty()) return SdpaMask::kCausal;
    std::string tried;
    for (SdpaMask mask : {SdpaMask::kDocumentBound, SdpaMask::kDocumentBias}) {
      why = cudnn_reason(B, T, C, NH, KVH, mask);
      if (why.empty()) return mask;
      tried += fmt::format("{}{} mask: {}", tried.empty() ? "" : "; ", sdpa_mask_name(mask), why);
    }
    why = tried;
    return SdpaMask::kCausal;
  }

  // The mask input of a cudnn call with positions: pos itself, or the bias built from it.
  const void* mask_input(const int* pos, int B, int T, const char* op) {
    if (document == SdpaMask::kCausal)
      throw std::logic_error(fmt::format("Attention::{}: document positions for a cudnn plan made without "
                                         "document_mask",
                                         op));
    if (document == SdpaMask::kDocumentBound) return pos;
    document_bias(bias.as<bf16>(), pos, B, T, stream);  // bias holds the planned (B,T,T)
    return bias.data();
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
  SdpaMask document = SdpaMask::kCausal;  // of the cudnn method with document_mask
  if (m == Method::kAuto) {
    if (p == DType::kF32) {
      // cuBLASLt's fp32 GEMMs instead of the exact kernels' one warp per query row: far
      // faster at T = 1024 (docs/cuda.md), within the same 1e-5 of the CPU twin.
      m = Method::kFallback;
    } else if (document_mask) {
      document = impl_->document_mask_for(B, T, C, NH, KVH, why_not_cudnn);
      m = why_not_cudnn.empty() ? Method::kCudnn : Method::kFallback;
    } else {
      why_not_cudnn = impl_->cudnn_reason(B, T, C, NH, KVH);
      m = why_not_cudnn.empty() ? Method::kCudnn : Method::kFallback;
    }
  } else if (m == Method::kCudnn) {
    if (p != DType::kBf16) refuse("cuDNN fused attention is bf16 only; use fallback or exact");
    std::string why;
    if (document_mask)
      document = impl_->document_mask_for(B, T, C, NH, KVH, why);
    else
      why = impl_->cudnn_reason(B, T, C, NH, KVH);
    if (!why.empty()) refuse(why);
  } else if (m == Method::kExact && p != DType::kF32) {
    refuse("the exact kernels are fp32 only; use cudnn or fallback");
  }
  impl_->of(p) = m;
  impl_->max_B[p == DType::kBf16] = B;
  impl_->max_T[p == DType::kBf16] = T;
  if (m != Method::kCudnn) document = SdpaMask::kCausal;
  if (p == DType::kBf16) impl_->document = document;  // only bf16 has the cudnn method
  if (document == SdpaMask::kDocumentBias) {
    const std::size_t bytes = document_bias_bytes(B, T);
    if (impl_->bias.bytes() < bytes) {
      HOLMES_CUDA_CHECK(cudaDeviceSynchronize());  // a smaller one may be in use on the stream
      impl_->bias = DeviceBuffer(bytes);
    }
  }
  const AttentionSizes sizes = attention_sizes(m, p, B, T, NH);
  return {sizes.state_floats, sizes.scratch_floats,
          method_line(m, p, why_not_cudnn, document, impl_->bias.bytes()), m != Method::kCudnn};
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
    if (pos != nullptr)
      impl_->sdpa.forward(out, att, qkv, B, T, C, NH, KVH, impl_->stream, impl_->document,
                          impl_->mask_input(pos, B, T, "forward"));
    else
      impl_->sdpa.forward(out, att, qkv, B, T, C, NH, KVH, impl_->stream);
  } else {
    fallback_forward(impl_->gemm, out, reinterpret_cast<bf16*>(att), qkv, pos, B, T, C, NH, KVH,
                     impl_->stream);
  }
}

// The fallback and exact backwards read only the probabilities the forward kept, 0 outside each
// document's block: they need no positions. The cudnn backward recomputes the probabilities
// from the statistics, so it masks again with the same positions.
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
    if (pos != nullptr)
      impl_->sdpa.backward(dqkv, dout, qkv, out, att, B, T, C, NH, KVH, impl_->stream, impl_->document,
                           impl_->mask_input(pos, B, T, "backward"));
    else
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
