// What the cuDNN attention graphs compute, checked without a GPU: the operations and tensors
// CudnnGraphBuilder handed to cuDNN (its tensor_infos / op_infos) are evaluated here in double
// precision, with the bound tensors read and written through their strides in host copies of
// qkv, out, dout and dqkv, and compared with the CPU twin (model/cpu attention). This catches
// what the offline engine check cannot: a causal mask facing the wrong way, select operands
// swapped, a wrong transpose or stride (K^T, P^T, dS^T, the K reshape), the statistics
// convention, and the backward's formulas. Only the engines' own numerics need a GPU.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include "cuda/attention_plan.hpp"
#include "cuda/cudnn_api.hpp"
#include "cuda/cudnn_graph.hpp"
#include "cuda/cudnn_sdpa.hpp"
#include "cuda_test_util.hpp"
#include "model/cpu/cpu_ops.hpp"

using namespace holmes::cuda;

namespace {

using Index = std::array<std::int64_t, 4>;

std::int64_t count_of(const Dims4& d) { return d[0] * d[1] * d[2] * d[3]; }

Index unflatten(std::int64_t i, const Dims4& d) {
  Index x{};
  for (int a = 3; a >= 0; --a) {
    x[a] = i % d[a];
    i /= d[a];
  }
  return x;
}

std::int64_t offset_of(const Index& x, const Dims4& strides) {
  return x[0] * strides[0] + x[1] * strides[1] + x[2] * strides[2] + x[3] * strides[3];
}

// Where a bound tensor lives: a host buffer and the element offset of its first value.
struct Binding {
  std::vector<double>* buf;
  std::int64_t offset;
};

// Evaluates the graph: every tensor's logical values (dense over its dims), bound inputs read
// through their strides, bound outputs written through them.
class Emulator {
 public:
  Emulator(const CudnnGraphBuilder& g, std::map<std::int64_t, Binding> bindings)
      : bindings_(std::move(bindings)) {
    for (const GraphTensorInfo& t : g.tensor_infos()) info_[t.uid] = t;
    for (const GraphOpInfo& op : g.op_infos()) run(op);
  }

 private:
  const std::vector<double>& value(std::int64_t uid) {
    auto it = values_.find(uid);
    if (it != values_.end()) return it->second;
    const GraphTensorInfo& t = info_.at(uid);
    REQUIRE_FALSE(t.is_virtual);  // a virtual tensor is read before it was written
    const Binding& b = bindings_.at(uid);
    std::vector<double> v(count_of(t.dims));
    for (std::int64_t i = 0; i < std::int64_t(v.size()); ++i)
      v[i] = (*b.buf)[b.offset + offset_of(unflatten(i, t.dims), t.strides)];
    return values_[uid] = std::move(v);
  }

  void store(std::int64_t uid, std::vector<double> v) {
    const GraphTensorInfo& t = info_.at(uid);
    if (!t.is_virtual) {
      const Binding& b = bindings_.at(uid);
      for (std::int64_t i = 0; i < std::int64_t(v.size()); ++i)
        (*b.buf)[b.offset + offset_of(unflatten(i, t.dims), t.strides)] = v[i];
    }
    values_[uid] = std::move(v);
  }

  // An input's value at index x of an index space `space` (the output's dims): dimensions of
  // size 1 broadcast; a dimension that divides the space's (K, V with fewer heads than Q)
  // broadcasts in groups: index i reads i / (space / size), as cuDNN's grouped-query
  // attention (and Hugging Face's repeat_kv) pair query head h with key/value head h / G.
  double at(std::int64_t uid, const Index& x, const Dims4& space) {
    const Dims4& d = info_.at(uid).dims;
    Index y{};
    for (int a = 0; a < 4; ++a) {
      if (d[a] == 1 || d[a] == space[a]) {
        y[a] = d[a] == 1 ? 0 : x[a];
      } else {
        REQUIRE(space[a] % d[a] == 0);
        y[a] = x[a] / (space[a] / d[a]);
      }
    }
    return value(uid)[((y[0] * d[1] + y[1]) * d[2] + y[2]) * d[3] + y[3]];
  }

  void run(const GraphOpInfo& op) {
    const Dims4 out = info_.at(op.out).dims;
    std::vector<double> v(count_of(out));
    switch (op.kind) {
      case GraphOpInfo::kPointwise:
        for (std::int64_t i = 0; i < std::int64_t(v.size()); ++i)
          v[i] = pointwise(op, unflatten(i, out));
        break;
      case GraphOpInfo::kReduction: {
        const Dims4 in = info_.at(op.in[0]).dims;
        const bool max = op.mode == CUDNN_REDUCE_TENSOR_MAX;
        REQUIRE((max || op.mode == CUDNN_REDUCE_TENSOR_ADD));
        std::fill(v.begin(), v.end(), max ? -INFINITY : 0.0);
        for (std::int64_t i = 0; i < count_of(in); ++i) {
          // Into a dimension of size 1: everything; into a smaller one: groups of in / out.
          Index x = unflatten(i, in), y{};
          for (int a = 0; a < 4; ++a) y[a] = out[a] == 1 ? 0 : x[a] / (in[a] / out[a]);
          double& r = v[((y[0] * out[1] + y[1]) * out[2] + y[2]) * out[3] + y[3]];
          const double s = at(op.in[0], x, in);
          r = max ? std::max(r, s) : r + s;
        }
        break;
      }
      case GraphOpInfo::kMatmul: {
        const std::int64_t K = info_.at(op.in[0]).dims[3];
        REQUIRE(info_.at(op.in[1]).dims[2] == K);
        // The operands' index spaces: the output's batch dims, [M, K] and [K, N].
        const Dims4 a_space{out[0], out[1], out[2], K}, b_space{out[0], out[1], K, out[3]};
        for (std::int64_t i = 0; i < std::int64_t(v.size()); ++i) {
          const Index x = unflatten(i, out);
          double acc = 0;
          for (std::int64_t k = 0; k < K; ++k)
            acc += at(op.in[0], {x[0], x[1], x[2], k}, a_space) * at(op.in[1], {x[0], x[1], k, x[3]}, b_space);
          v[i] = acc;
        }
        break;
      }
      case GraphOpInfo::kReshape: {
        // The same memory seen through other dims and strides: lay the input out by its own
        // strides (a bound input already is), then read it back through the output's.
        const GraphTensorInfo& x = info_.at(op.in[0]);
        const GraphTensorInfo& y = info_.at(op.out);
        std::vector<double> mem;
        const std::vector<double>* buf = &mem;
        std::int64_t base = 0;
        if (x.is_virtual) {
          const std::vector<double>& xv = value(x.uid);
          for (std::int64_t i = 0; i < count_of(x.dims); ++i) {
            const std::int64_t o = offset_of(unflatten(i, x.dims), x.strides);
            if (o >= std::int64_t(mem.size())) mem.resize(o + 1);
            mem[o] = xv[i];
          }
        } else {
          buf = bindings_.at(x.uid).buf;
          base = bindings_.at(x.uid).offset;
        }
        for (std::int64_t i = 0; i < std::int64_t(v.size()); ++i)
          v[i] = (*buf)[base + offset_of(unflatten(i, y.dims), y.strides)];
        break;
      }
    }
    store(op.out, std::move(v));
  }

  double pointwise(const GraphOpInfo& op, const Index& x) {
    auto in = [&](int k) { return at(op.in.at(k), x, info_.at(op.out).dims); };
    switch (op.mode) {
      case CUDNN_POINTWISE_ADD: return in(0) + in(1);
      case CUDNN_POINTWISE_SUB: return in(0) - in(1);
      case CUDNN_POINTWISE_MUL: return in(0) * in(1);
      case CUDNN_POINTWISE_DIV: return in(0) / in(1);
      case CUDNN_POINTWISE_EXP: return std::exp(in(0));
      case CUDNN_POINTWISE_LOG: return std::log(in(0));
      case CUDNN_POINTWISE_CMP_GE: return in(0) >= in(1) ? 1.0 : 0.0;
      case CUDNN_POINTWISE_LOGICAL_AND: return in(0) != 0.0 && in(1) != 0.0 ? 1.0 : 0.0;
      case CUDNN_POINTWISE_BINARY_SELECT: return in(2) != 0.0 ? in(0) : in(1);  // t ? x : b
      case CUDNN_POINTWISE_GEN_INDEX: return double(x.at(op.axis));
      default: FAIL("pointwise mode " << op.mode << " is not emulated");
    }
    return 0;
  }

  std::map<std::int64_t, GraphTensorInfo> info_;
  std::map<std::int64_t, Binding> bindings_;
  std::map<std::int64_t, std::vector<double>> values_;
};

double max_error(const std::vector<double>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  double err = 0, scale = 1e-30;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    err = std::max(err, std::fabs(got[i] - want[i]));
    scale = std::max(scale, std::fabs(double(want[i])));
  }
  return err / scale;
}

}  // namespace

namespace {

// Both graphs of one shape through the emulator against the CPU twin: the forward's output and
// statistics, then every backward form's dQ, dK, dV (written in place into a qkv-shaped
// buffer). Rows of qkv are [q NH heads | k KVH heads | v KVH heads] of HS channels. With a
// document mask, `pos` (B,T) are the tokens' positions in their documents: bound as they are
// (kDocumentBound) or as the bias document_bias_reference makes of them (kDocumentBias), and
// the CPU twin masks with them too.
void check_graphs(int B, int T, int NH, int KVH, int HS, SdpaMask mask = SdpaMask::kCausal,
                  const std::vector<int>& pos = {}) {
  INFO("B=" << B << " T=" << T << " NH=" << NH << " KVH=" << KVH << " HS=" << HS << " " << sdpa_mask_name(mask));
  REQUIRE((mask == SdpaMask::kCausal) == pos.empty());
  const int C = NH * HS, W = (NH + 2 * KVH) * HS, G = NH / KVH;
  const int k_at = C, v_at = C + KVH * HS;
  const std::size_t n_qkv = std::size_t(B) * T * W, n_out = std::size_t(B) * T * C;
  const auto qkv32 = holmes::cuda::test::random_floats(n_qkv, 11, -2.f, 2.f);
  const auto dout32 = holmes::cuda::test::random_floats(n_out, 12);
  std::vector<float> out(n_out), att(std::size_t(B) * NH * T * T), scratch(att.size()),
      dqkv(n_qkv);
  holmes::model::cpu::attention_forward(out.data(), att.data(), qkv32.data(), B, T, C, NH, KVH,
                                        pos.empty() ? nullptr : pos.data());
  holmes::model::cpu::attention_backward(dqkv.data(), scratch.data(), dout32.data(),
                                         qkv32.data(), att.data(), B, T, C, NH, KVH);
  // The statistics the backward reads: log-sum-exp of each row's scaled, masked scores.
  std::vector<float> lse(std::size_t(B) * NH * T);
  std::vector<double> s(T);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h)
      for (int t = 0; t < T; ++t) {
        double mx = -INFINITY, sum = 0;
        const int first = pos.empty() ? 0 : t - pos[b * T + t];  // the query's document's first key
        for (int j = first; j <= t; ++j) {
          s[j] = 0;
          for (int d = 0; d < HS; ++d)
            s[j] += double(qkv32[(b * T + t) * W + h * HS + d]) *
                    qkv32[(b * T + j) * W + k_at + (h / G) * HS + d];
          s[j] /= std::sqrt(double(HS));
          mx = std::max(mx, s[j]);
        }
        for (int j = first; j <= t; ++j) sum += std::exp(s[j] - mx);
        lse[(b * NH + h) * T + t] = float(mx + std::log(sum));
      }

  std::vector<double> qkv(qkv32.begin(), qkv32.end()), dout(dout32.begin(), dout32.end());
  std::vector<double> o(n_out, NAN), stats(lse.size(), NAN), dq(n_qkv, NAN), sum(lse.size());
  std::vector<double> scale{1.0 / std::sqrt(double(HS))};
  std::vector<double> lowest{std::numeric_limits<float>::lowest()}, one{1.0};
  // The mask's input as the engine reads it: pos as int32, or the bias's bf16 values.
  std::vector<double> mask_in;
  if (mask == SdpaMask::kDocumentBound) mask_in.assign(pos.begin(), pos.end());
  if (mask == SdpaMask::kDocumentBias) {
    std::vector<std::uint16_t> bits(std::size_t(B) * T * T);
    document_bias_reference(bits.data(), pos.data(), B, T);
    for (std::uint16_t b : bits) mask_in.push_back(holmes::cuda::test::bf16_value(b));
  }

  // Bound tensors in creation order (cudnn_sdpa.cpp): Q, K, V, O, stats, scale, lowest, and
  // the mask's input last.
  CudnnGraphBuilder fwd;
  build_sdpa_graph(fwd, false, B, T, C, NH, KVH, 0, mask);
  const auto& fu = fwd.bound_uids();
  REQUIRE(fu.size() == (mask == SdpaMask::kCausal ? 7u : 8u));
  std::map<std::int64_t, Binding> fbind{{fu[0], {&qkv, 0}},   {fu[1], {&qkv, k_at}},   {fu[2], {&qkv, v_at}},
                                        {fu[3], {&o, 0}},     {fu[4], {&stats, 0}},    {fu[5], {&scale, 0}},
                                        {fu[6], {&lowest, 0}}};
  if (mask != SdpaMask::kCausal) fbind.insert({kSdpaMaskUid, {&mask_in, 0}});
  Emulator(fwd, fbind);
  CHECK(max_error(o, out) <= 1e-5);
  CHECK(max_error(stats, lse) <= 1e-5);

  // Q, K, V, O, dO, stats, dQ, dK, dV, 1, scale, lowest, and D when in the workspace. The
  // backward reads the CPU twin's output and the statistics the forward graph wrote.
  std::vector<double> out64(out.begin(), out.end());
  for (int form = 0; form < kBackwardForms; ++form) {
    INFO("backward form " << form);
    CudnnGraphBuilder bwd;
    build_sdpa_graph(bwd, true, B, T, C, NH, KVH, form, mask);
    std::vector<std::int64_t> bu = bwd.bound_uids();
    if (mask != SdpaMask::kCausal) {
      REQUIRE(bu.back() == kSdpaMaskUid);
      bu.pop_back();
    }
    REQUIRE(bu.size() >= 12);
    std::fill(dq.begin(), dq.end(), NAN);
    std::map<std::int64_t, Binding> bind{{bu[0], {&qkv, 0}},     {bu[1], {&qkv, k_at}},
                                         {bu[2], {&qkv, v_at}},  {bu[3], {&out64, 0}},
                                         {bu[4], {&dout, 0}},    {bu[5], {&stats, 0}},
                                         {bu[6], {&dq, 0}},      {bu[7], {&dq, k_at}},
                                         {bu[8], {&dq, v_at}},   {bu[9], {&one, 0}},
                                         {bu[10], {&scale, 0}},  {bu[11], {&lowest, 0}}};
    if (bu.size() == 13) bind.insert({bu[12], {&sum, 0}});
    if (mask != SdpaMask::kCausal) bind.insert({kSdpaMaskUid, {&mask_in, 0}});
    Emulator(bwd, bind);
    CHECK(max_error(dq, dqkv) <= 1e-4);
  }
}

}  // namespace

TEST_CASE("the cuDNN attention graphs compute causal attention and its gradients (host model)",
          "[cuda][attention]") {
  REQUIRE(cudnn_available());
  check_graphs(2, 7, 2, 2, 16);
}

TEST_CASE("the grouped-query cuDNN attention graphs compute the same as the CPU twin (host model)",
          "[cuda][attention]") {
  REQUIRE(cudnn_available());
  check_graphs(2, 7, 4, 2, 8);  // two query heads per key/value head
  check_graphs(1, 6, 3, 1, 8);  // multi-query: one key/value head
}

TEST_CASE("the document-masked cuDNN attention graphs compute block-causal attention (host model)",
          "[cuda][attention]") {
  REQUIRE(cudnn_available());
  // Row 0 one document over the whole sequence; row 1 documents of 3, 1, 2 and 3 tokens.
  const std::vector<int> pos = holmes::cuda::test::document_positions(2, 9, {9, 3, 1, 2});
  REQUIRE(pos == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 2, 0, 0, 1, 0, 1, 2});
  for (SdpaMask mask : {SdpaMask::kDocumentBound, SdpaMask::kDocumentBias}) {
    check_graphs(2, 9, 2, 2, 16, mask, pos);
    check_graphs(2, 9, 4, 2, 8, mask, pos);  // grouped-query
  }
}

TEST_CASE("the document bias's CPU twin keeps each query's document up to itself", "[cuda][attention]") {
  const std::vector<int> pos = {0, 1, 0, 0, 1, 2};  // documents of 2, 1 and 3 tokens
  std::vector<std::uint16_t> bias(36, 0x1234);
  document_bias_reference(bias.data(), pos.data(), 1, 6);
  const std::uint16_t o = 0, x = kBf16LowestBits;
  CHECK(bias == std::vector<std::uint16_t>{o, x, x, x, x, x,  //
                                           o, o, x, x, x, x,  //
                                           x, x, o, x, x, x,  //
                                           x, x, x, o, x, x,  //
                                           x, x, x, o, o, x,  //
                                           x, x, x, o, o, o});
  CHECK(holmes::cuda::test::bf16_value(x) == -0x1.fep127f);  // -(2 - 2^-7) 2^127
  const std::vector<int> bad = {0, 2};
  CHECK_THROWS_AS(document_bias_reference(bias.data(), bad.data(), 1, 2), std::invalid_argument);
}
