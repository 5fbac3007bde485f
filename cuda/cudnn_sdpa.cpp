#include "cuda/cudnn_sdpa.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>
#include <vector>
#include <tuple>

#include "cuda/attention_plan.hpp"
#include "cuda/check.hpp"
#include "cuda/cudnn_api.hpp"
#include "cuda/cudnn_graph.hpp"
#include "cuda/device_buffer.hpp"

namespace holmes::cuda {

namespace {

// Unique ids of the tensors bound at execution.
enum Uid : std::int64_t {
  kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV, kScale, kLowest, kOne, kSoftmaxSum
};

constexpr cudnnDataType_t kBf16 = CUDNN_DATA_BFLOAT16;
constexpr cudnnDataType_t kF32 = CUDNN_DATA_FLOAT;

// The fixed sizes of one graph and the layouts of its bound tensors.
struct Shape {
  std::int64_t B, H, T, D;
  HeadView q, k, v, o;
  Dims4 kt_dims, kt_strides;  // K^T (and V^T): [B, H, D, T], the strides of K swapped
  Dims4 vt_dims, vt_strides;
  Dims4 stats_dims, stats_strides;
  Dims4 scores_dims, scores_strides;  // [B, H, T, T] packed
  Dims4 scores_t_strides;             // the same memory read transposed
  Dims4 full_dims, full_strides;      // [B, H, T, D] packed: dK, dV per query head (GQA)

  std::int64_t Hkv;  // key/value heads (grouped-query attention when < H)

  Shape(int B_, int T_, int C, int NH, int KVH)
      : B(B_), H(NH), T(T_), D(C / NH), q(qkv_view(B_, T_, C, NH, KVH, 0)),
        k(qkv_view(B_, T_, C, NH, KVH, 1)), v(qkv_view(B_, T_, C, NH, KVH, 2)), o(out_view(B_, T_, C, NH)),
        Hkv(KVH) {
    kt_dims = {B, Hkv, D, T};
    kt_strides = {k.strides[0], k.strides[1], k.strides[3], k.strides[2]};
    vt_dims = kt_dims;
    vt_strides = {v.strides[0], v.strides[1], v.strides[3], v.strides[2]};
    stats_dims = {B, H, T, 1};
    stats_strides = {H * T, T, 1, 1};
    scores_dims = {B, H, T, T};
    scores_strides = {H * T * T, T * T, T, 1};
    scores_t_strides = {H * T * T, T * T, 1, T};
    full_dims = {B, H, T, D};
    full_strides = {H * T * D, T * D, D, 1};
  }
  bool grouped() const { return Hkv != H; }
};

// The forms of the backward graph tried, in order, until cuDNN offers an engine: cudnn-frontend
// has emitted each of them for some cuDNN 9 release (the mask before or after subtracting the
// statistics; D = rowsum(dO*O) as a workspace tensor or virtual).
struct BackwardForm {
  bool mask_after_stats;
  bool sum_in_workspace;
};
constexpr BackwardForm kBackwardForm[kBackwardForms] = {
    {false, true}, {true, true}, {false, false}};

// The mask's input tensor of a graph (null for the causal mask), created by mask_input().
struct MaskIn {
  SdpaMask kind = SdpaMask::kCausal;
  cudnnBackendDescriptor_t input = nullptr;
};

// pos [B,1,T,1] int32 (kDocumentBound) or the bias [B,1,T,T] bf16 (kDocumentBias), bound by
// kSdpaMaskUid; created after every other bound tensor so it is bound last.
MaskIn mask_input(CudnnGraphBuilder& g, const Shape& s, SdpaMask kind) {
  MaskIn m{kind, nullptr};
  if (kind == SdpaMask::kDocumentBound)
    m.input = g.tensor(kSdpaMaskUid, CUDNN_DATA_INT32, {s.B, 1, s.T, 1}, {s.T, s.T, 1, 1});
  else if (kind == SdpaMask::kDocumentBias)
    m.input = g.tensor(kSdpaMaskUid, kBf16, {s.B, 1, s.T, s.T}, {s.T * s.T, s.T * s.T, s.T, 1});
  return m;
}

// Scores with the mask applied: entries whose key the query may not see become the lowest
// float, so exp() gives 0 there. Kept: column <= row (causal), and with kDocumentBound also
// column >= row - pos[b,row] (the query's document starts there).
cudnnBackendDescriptor_t apply_mask(CudnnGraphBuilder& g, const Shape& s, cudnnBackendDescriptor_t scores,
                                    cudnnBackendDescriptor_t lowest, const MaskIn& m) {
  auto row = g.virtual_tensor(CUDNN_DATA_INT32, s.scores_dims, s.scores_strides);
  auto col = g.virtual_tensor(CUDNN_DATA_INT32, s.scores_dims, s.scores_strides);
  auto keep = g.virtual_tensor(CUDNN_DATA_BOOLEAN, s.scores_dims, s.scores_strides);
  auto masked = g.virtual_tensor(kF32, s.scores_dims, s.scores_strides);
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, scores, nullptr, row, CUDNN_DATA_INT32, nullptr, 2);
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, scores, nullptr, col, CUDNN_DATA_INT32, nullptr, 3);
  g.pointwise(CUDNN_POINTWISE_CMP_GE, row, col, keep, CUDNN_DATA_BOOLEAN);
  if (m.kind == SdpaMask::kDocumentBound) {
    auto start = g.virtual_tensor(CUDNN_DATA_INT32, s.scores_dims, s.scores_strides);
    auto in_doc = g.virtual_tensor(CUDNN_DATA_BOOLEAN, s.scores_dims, s.scores_strides);
    auto both = g.virtual_tensor(CUDNN_DATA_BOOLEAN, s.scores_dims, s.scores_strides);
    g.pointwise(CUDNN_POINTWISE_SUB, row, m.input, start, CUDNN_DATA_INT32);  // the document's first key
    g.pointwise(CUDNN_POINTWISE_CMP_GE, col, start, in_doc, CUDNN_DATA_BOOLEAN);
    g.pointwise(CUDNN_POINTWISE_LOGICAL_AND, keep, in_doc, both, CUDNN_DATA_BOOLEAN);
    keep = both;
  }
  g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, scores, lowest, masked, kF32, keep);
  return masked;
}

// S = (Q K^T) * scale (+ the bias of kDocumentBias), masked unless `mask` is false.
cudnnBackendDescriptor_t scaled_scores(CudnnGraphBuilder& g, const Shape& s,
                                       cudnnBackendDescriptor_t q, cudnnBackendDescriptor_t kt,
                                       cudnnBackendDescriptor_t scale,
                                       cudnnBackendDescriptor_t lowest, const MaskIn& m, bool mask) {
  auto qk = g.virtual_tensor(kF32, s.scores_dims, s.scores_strides);
  auto scaled = g.virtual_tensor(kF32, s.scores_dims, s.scores_strides);
  g.matmul(q, kt, qk);
  g.pointwise(CUDNN_POINTWISE_MUL, qk, scale, scaled);
  if (m.kind == SdpaMask::kDocumentBias) {
    auto biased = g.virtual_tensor(kF32, s.scores_dims, s.scores_strides);
    g.pointwise(CUDNN_POINTWISE_ADD, scaled, m.input, biased);
    scaled = biased;
  }
  return mask ? apply_mask(g, s, scaled, lowest, m) : scaled;
}

void build_forward(CudnnGraphBuilder& g, const Shape& s, SdpaMask mask_kind) {
  auto q = g.tensor(kQ, kBf16, s.q.dims, s.q.strides);
  auto kt = g.tensor(kK, kBf16, s.kt_dims, s.kt_strides);
  auto v = g.tensor(kV, kBf16, s.v.dims, s.v.strides);
  auto o = g.tensor(kO, kBf16, s.o.dims, s.o.strides);
  auto stats = g.tensor(kStats, kF32, s.stats_dims, s.stats_strides);
  auto scale = g.scalar(kScale, kF32), lowest = g.scalar(kLowest, kF32);
  const MaskIn m = mask_input(g, s, mask_kind);
  auto scores = scaled_scores(g, s, q, kt, scale, lowest, m, true);
  // Softmax keeping stats = max + log(sum exp(x - max)) for the backward.
  auto row_max = g.virtual_tensor(kF32, s.stats_dims, s.stats_strides);
  auto shifted = g.virtual_tensor(kF32, s.scores_dims, s.scores_strides);
  auto e = g.virtual_tensor(kF32, s.scores_dims, s.scores_strides);
  auto sum = g.virtual_tensor(kF32, s.stats_dims, s.stats_strides);
  auto log_sum = g.virtual_tensor(kF32, s.stats_dims, s.stats_strides);
  auto p = g.virtual_tensor(kBf16, s.scores_dims, s.scores_strides);  // P V's A in bf16
  g.reduction(CUDNN_REDUCE_TENSOR_MAX, scores, row_max);
  g.pointwise(CUDNN_POINTWISE_SUB, scores, row_max, shifted);
  g.pointwise(CUDNN_POINTWISE_EXP, shifted, nullptr, e);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, e, sum);
  g.pointwise(CUDNN_POINTWISE_LOG, sum, nullptr, log_sum);
  g.pointwise(CUDNN_POINTWISE_ADD, row_max, log_sum, stats);
  g.pointwise(CUDNN_POINTWISE_DIV, e, sum, p);
  g.matmul(p, v, o);
}

// out = a x b for the key/value heads' gradients (dK, dV): directly with as many query as
// key/value heads; with grouped-query attention a per-query-head product (virtual, bf16,
// [B, H, T, D]) summed over each group into out by a reduction, the form cuDNN's fused
// engines recognise (cudnn-frontend emits it).
void matmul_per_kv_head(CudnnGraphBuilder& g, const Shape& s, cudnnBackendDescriptor_t a,
                        cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t out) {
  if (!s.grouped()) {
    g.matmul(a, b, out);
    return;
  }
  auto full = g.virtual_tensor(kBf16, s.full_dims, s.full_strides);
  g.matmul(a, b, full);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, full, out);
}

void build_backward(CudnnGraphBuilder& g, const Shape& s, const BackwardForm& form, SdpaMask mask_kind) {
  auto q = g.tensor(kQ, kBf16, s.q.dims, s.q.strides);
  auto kt = g.tensor(kK, kBf16, s.kt_dims, s.kt_strides);
  auto vt = g.tensor(kV, kBf16, s.vt_dims, s.vt_strides);
  auto o = g.tensor(kO, kBf16, s.o.dims, s.o.strides);
  auto d_o = g.tensor(kDO, kBf16, s.o.dims, s.o.strides);
  auto stats = g.tensor(kStats, kF32, s.stats_dims, s.stats_strides);
  auto dq = g.tensor(kDQ, kBf16, s.q.dims, s.q.strides);
  auto dk = g.tensor(kDK, kBf16, s.k.dims, s.k.strides);
  auto dv = g.tensor(kDV, kBf16, s.v.dims, s.v.strides);
  auto one = g.scalar(kOne, kF32);
  auto scale = g.scalar(kScale, kF32), lowest = g.scalar(kLowest, kF32);
  // D = rowsum(dO * O), kept in the workspace (uid kSoftmaxSum).
  auto d_o_o = g.virtual_tensor(kF32, s.o.dims, {s.H * s.T * s.D, s.T * s.D, s.H * s.D, 1});
  auto d_sum = g.virtual_tensor(kF32, s.stats_dims, s.stats_strides);
  auto softmax_sum = form.sum_in_workspace
                         ? g.tensor(kSoftmaxSum, kF32, s.stats_dims, s.stats_strides)
                         : g.virtual_tensor(kF32, s.stats_dims, s.stats_strides);
  g.pointwise(CUDNN_POINTWISE_MUL, d_o, o, d_o_o);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, d_o_o, d_sum);
  g.pointwise(CUDNN_POINTWISE_MUL, d_sum, one, softmax_sum);
  // P = exp(S - stats), recomputed; dV = P^T dO.
  const MaskIn m = mask_input(g, s, mask_kind);
  auto scores = scaled_scores(g, s, q, kt, scale, lowest, m, !form.mask_after_stats);
  auto shifted = g.virtual_tensor(kF32, s.scores_dims, s.scores_strides);
  auto p = g.virtual_tensor(kF32, s.scores_dims, s.scores_strides);
  auto p_t = g.virtual_tensor(kBf16, s.scores_dims, s.scores_t_strides);
  g.pointwise(CUDNN_POINTWISE_SUB, scores, stats, shifted);
  if (form.mask_after_stats) shifted = apply_mask(g, s, shifted, lowest, m);
  g.pointwise(CUDNN_POINTWISE_EXP, shifted, nullptr, p);
  g.reshape(p, p_t);
  matmul_per_kv_head(g, s, p_t, d_o, dv);
  // dS = P * (dO V^T - D) * scale; dK = dS^T Q; dQ = dS K.
  auto dp = g.virtual_tensor(kF32, s.scores_dims, s.scores_strides);
  auto dp_centered = g.virtual_tensor(kF32, s.scores_dims, s.scores_strides);
  auto ds_unscaled = g.virtual_tensor(kF32, s.scores_dims, s.scores_strides);
  auto ds = g.virtual_tensor(kF32, s.scores_dims, s.scores_strides);
  auto ds_t = g.virtual_tensor(kBf16, s.scores_dims, s.scores_t_strides);
  g.matmul(d_o, vt, dp);
  g.pointwise(CUDNN_POINTWISE_SUB, dp, softmax_sum, dp_centered);
  g.pointwise(CUDNN_POINTWISE_MUL, dp_centered, p, ds_unscaled);
  g.pointwise(CUDNN_POINTWISE_MUL, ds_unscaled, scale, ds);
  g.reshape(ds, ds_t);
  matmul_per_kv_head(g, s, ds_t, q, dk);
  auto k = g.virtual_tensor(kBf16, s.k.dims, s.k.strides);
  g.reshape(kt, k);
  g.matmul(ds, k, dq);
}

using Key = std::tuple<bool, SdpaMask, int, int, int, int, int>;  // backward, mask, B, T, C, NH, KVH

}  // namespace

const char* sdpa_mask_name(SdpaMask m) {
  switch (m) {
    case SdpaMask::kCausal:
      return "causal";
    case SdpaMask::kDocumentBound:
      return "document bound";
    case SdpaMask::kDocumentBias:
      return "document bias";
  }
  return "?";
}

void build_sdpa_graph(CudnnGraphBuilder& g, bool backward, int B, int T, int C, int NH, int KVH, int form,
                      SdpaMask mask) {
  if (form < 0 || form >= (backward ? kBackwardForms : 1))
    throw std::invalid_argument(fmt::format("cuDNN attention graph form {} of the {} does not exist",
                                            form, backward ? "backward" : "forward"));
  if (backward)
    build_backward(g, Shape(B, T, C, NH, KVH), kBackwardForm[form], mask);
  else
    build_forward(g, Shape(B, T, C, NH, KVH), mask);
}

std::string check_sdpa_offline(const std::string& device_json, bool backward, int B, int T, int C,
                               int NH, int KVH, int form, std::int64_t* proposed, SdpaMask mask) {
  if (cudnn_version() < 90800)
    return fmt::format("cuDNN {} cannot describe a device without one (needs 9.8)",
                       cudnn_version());
  CudnnDesc device(CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR);
  device.set(CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION, CUDNN_TYPE_CHAR,
             static_cast<std::int64_t>(device_json.size()), device_json.data());
  device.finalize("device properties from JSON");
  CudnnGraphBuilder g;
  build_sdpa_graph(g, backward, B, T, C, NH, KVH, form, mask);
  CudnnDesc graph = g.finish(nullptr);
  CudnnPlan plan;
  std::string why = select_engine(nullptr, graph, plan, device.get());
  if (proposed) *proposed = plan.proposed;
  return why;
}

struct CudnnSdpa::Impl {
  cudnnHandle_t handle = nullptr;
  int device = -1;
  std::map<Key, std::unique_ptr<CudnnPlan>> plans;
  std::map<Key, std::string> failures;  // shapes without an engine, and why
  DeviceBuffer workspace;

  ~Impl() {
    plans.clear();
    if (handle) cudnn().destroy(handle);
  }

  void ensure_handle() {
    int current = 0;
    HOLMES_CUDA_CHECK(cudaGetDevice(&current));
    if (handle) {
      if (current != device)
        throw std::logic_error(fmt::format(
            "cuDNN attention made for GPU {} used while GPU {} is current", device, current));
      return;
    }
    HOLMES_CUDNN_CHECK(cudnn().create(&handle));
    device = current;
  }

  // The plan of `key`, built on first use; nullptr with `why` when cuDNN has no engine.
  const CudnnPlan* find(const Key& key, std::string& why) {
    if (auto it = plans.find(key); it != plans.end()) return it->second.get();
    if (auto it = failures.find(key); it != failures.end()) {
      why = it->second;
      return nullptr;
    }
    const auto [backward, mask, B, T, C, NH, KVH] = key;
    why = cudnn_attention_limits(cudnn_version(), T, C / NH);
    if (why.empty()) {
      std::string tried;
      for (int form = 0; form < (backward ? kBackwardForms : 1); ++form) {
        std::unique_ptr<CudnnPlan> plan = try_form(backward, mask, B, T, C, NH, KVH, form, why);
        if (plan) return plans.emplace(key, std::move(plan)).first->second.get();
        tried += fmt::format("{}form {}: {}", tried.empty() ? "" : "; ", form, why);
      }
      why = tried;
    }
    failures.emplace(key, why);
    return nullptr;
  }

  // The plan of one form of a graph, or nullptr with `why`.
  std::unique_ptr<CudnnPlan> try_form(bool backward, SdpaMask mask, int B, int T, int C, int NH, int KVH,
                                      int form, std::string& why) {
    try {
      ensure_handle();
      CudnnGraphBuilder g;
      build_sdpa_graph(g, backward, B, T, C, NH, KVH, form, mask);
      CudnnDesc graph = g.finish(handle);
      auto plan = std::make_unique<CudnnPlan>();
      why = select_engine(handle, graph, *plan);
      if (!why.empty()) return nullptr;
      plan->bound_uids = g.bound_uids();
      for (auto& d : g.owned()) plan->keep.push_back(std::move(d));
      return plan;
    } catch (const CudaError& e) {
      why = e.what();
      return nullptr;
    }
  }

  const CudnnPlan& require(const Key& key) {
    std::string why;
    const CudnnPlan* plan = find(key, why);
    if (!plan) {
      const auto [backward, mask, B, T, C, NH, KVH] = key;
      throw CudaError("CUDNN_STATUS_NOT_SUPPORTED",
                      fmt::format("no cuDNN attention {} ({} mask) for B={} T={} C={} NH={} KVH={}: {}",
                                  backward ? "backward" : "forward", sdpa_mask_name(mask), B, T, C, NH,
                                  KVH, why),
                      "CudnnSdpa", __FILE__, __LINE__);
    }
    return *plan;
  }

  // Workspace of at least `bytes` plus `extra` (256-aligned), grown as needed.
  void* workspace_for(std::int64_t bytes, std::int64_t extra) {
    const std::size_t need = std::size_t((bytes + 255) / 256 * 256 + extra);
    if (workspace.bytes() < need) {
      HOLMES_CUDA_CHECK(cudaDeviceSynchronize());  // the old one may be in use on a stream
      workspace = DeviceBuffer(need);
    }
    return workspace.data();
  }
};

CudnnSdpa::CudnnSdpa() : impl_(std::make_unique<Impl>()) {}
CudnnSdpa::~CudnnSdpa() = default;

std::string CudnnSdpa::prepare(bool backward, int B, int T, int C, int NH, int KVH, SdpaMask mask) {
  std::string why;
  if (!cudnn_available(&why)) return why;
  impl_->find(Key{backward, mask, B, T, C, NH, KVH}, why);
  return why;
}

namespace {

// The (uid, pointer) of the mask's input, checked against the mask; none for kCausal.
std::vector<std::pair<std::int64_t, void*>> mask_binding(SdpaMask mask, const void* input, const char* op) {
  if ((mask == SdpaMask::kCausal) != (input == nullptr))
    throw std::invalid_argument(fmt::format("CudnnSdpa::{}: the {} mask {}", op, sdpa_mask_name(mask),
                                            input ? "takes no input" : "needs its input (pos or bias)"));
  if (!input) return {};
  return {{kSdpaMaskUid, const_cast<void*>(input)}};
}

}  // namespace

void CudnnSdpa::forward(void* out, float* stats, const void* qkv, int B, int T, int C, int NH, int KVH,
                        cudaStream_t stream, SdpaMask mask, const void* mask_input) {
  auto bindings = mask_binding(mask, mask_input, "forward");
  const CudnnPlan& plan = impl_->require(Key{false, mask, B, T, C, NH, KVH});
  const Shape s(B, T, C, NH, KVH);
  float scale = 1.0f / std::sqrt(float(C / NH)), lowest = std::numeric_limits<float>::lowest();
  auto* base = static_cast<char*>(const_cast<void*>(qkv));
  const std::int64_t e = 2;  // bytes per bf16
  void* ws = impl_->workspace_for(plan.workspace_bytes, 0);
  HOLMES_CUDNN_CHECK(cudnn().set_stream(impl_->handle, stream));
  bindings.insert(bindings.end(), {{kQ, base + s.q.offset * e},
                                   {kK, base + s.k.offset * e},
                                   {kV, base + s.v.offset * e},
                                   {kO, out},
                                   {kStats, stats},
                                   {kScale, &scale},
                                   {kLowest, &lowest}});
  execute_plan(impl_->handle, plan, bindings, ws);
}

void CudnnSdpa::backward(void* dqkv, const void* dout, const void* qkv, const void* out,
                         const float* stats, int B, int T, int C, int NH, int KVH, cudaStream_t stream,
                         SdpaMask mask, const void* mask_input) {
  auto bindings = mask_binding(mask, mask_input, "backward");
  const CudnnPlan& plan = impl_->require(Key{true, mask, B, T, C, NH, KVH});
  const Shape s(B, T, C, NH, KVH);
  float scale = 1.0f / std::sqrt(float(C / NH)), lowest = std::numeric_limits<float>::lowest();
  float one = 1.0f;
  auto* base = static_cast<char*>(const_cast<void*>(qkv));
  auto* dbase = static_cast<char*>(dqkv);
  const std::int64_t e = 2;  // bytes per bf16
  const std::int64_t sum_bytes = s.B * s.H * s.T * std::int64_t(sizeof(float));
  char* ws = static_cast<char*>(impl_->workspace_for(plan.workspace_bytes, sum_bytes));
  void* softmax_sum = ws + (plan.workspace_bytes + 255) / 256 * 256;
  HOLMES_CUDNN_CHECK(cudnn().set_stream(impl_->handle, stream));
  bindings.insert(bindings.end(), {{kQ, base + s.q.offset * e},
                                   {kK, base + s.k.offset * e},
                                   {kV, base + s.v.offset * e},
                                   {kO, const_cast<void*>(out)},
                                   {kDO, const_cast<void*>(dout)},
                                   {kStats, const_cast<float*>(stats)},
                                   {kDQ, dbase + s.q.offset * e},
                                   {kDK, dbase + s.k.offset * e},
                                   {kDV, dbase + s.v.offset * e},
                                   {kSoftmaxSum, softmax_sum},
                                   {kScale, &scale},
                                   {kLowest, &lowest},
                                   {kOne, &one}});
  execute_plan(impl_->handle, plan, bindings, ws);
}

}  // namespace holmes::cuda
