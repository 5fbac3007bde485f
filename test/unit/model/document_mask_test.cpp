// Document masking on the CPU (data.document_mask, data.mask_document_start): the ops with
// document positions against finite differences (attention block-causal per document, rotary
// and learned positions restarting at each document), and the whole model: documents packed
// in a sequence give the logits and, summed, the gradients of each document run alone, for
// GPT-2 and Llama (grouped-query heads), with and without targets left out of the loss.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <numeric>

#include "backends/backends.hpp"
#include "model/gpt2/gpt2.hpp"
#include "model/llama/llama.hpp"
#include "test/unit/model/check_util.hpp"
#include "test/unit/model/model_test_util.hpp"

using namespace holmes::model;
using holmes::model::test::check_gradient;
using holmes::model::test::probe;
using holmes::model::test::random_vec;

namespace {

std::unique_ptr<Kernels> kernels() { return holmes::backends::make_backend(holmes::backends::Device::kCpu).kernels; }

// Positions of sequences made of documents of the given lengths (each row's lengths sum to T).
std::vector<int> positions_of(const std::vector<std::vector<int>>& docs) {
  std::vector<int> pos;
  for (const auto& row : docs)
    for (int len : row)
      for (int t = 0; t < len; ++t) pos.push_back(t);
  return pos;
}

}  // namespace

TEST_CASE("document-masked attention: block-causal probabilities, backward matches finite differences",
          "[model][ops]") {
  auto k = kernels();
  const int B = 2, T = 9, NH = 4, KVH = 2, HS = 5, C = NH * HS, W = (NH + 2 * KVH) * HS;
  const std::vector<int> pos = positions_of({{3, 4, 2}, {5, 4}});
  auto qkv = random_vec(B * T * W, 21);
  auto wout = random_vec(B * T * C, 22);
  std::vector<float> out(B * T * C), att(B * NH * T * T), scratch(B * NH * T * T), dqkv(B * T * W);
  auto loss = [&] {
    k->attention_forward(out.data(), att.data(), qkv.data(), pos.data(), B, T, C, NH, KVH);
    return probe(out, wout);
  };
  loss();
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h)
      for (int t = 0; t < T; ++t) {
        const int lo = t - pos[b * T + t];
        double row = 0;
        for (int t2 = 0; t2 < T; ++t2) {
          const float p = att[((static_cast<size_t>(b) * NH + h) * T + t) * T + t2];
          if (t2 < lo || t2 > t) REQUIRE(p == 0.0f);  // another document, or the future
          row += p;
        }
        REQUIRE(row == Approx(1.0).epsilon(1e-5));
      }
  k->attention_backward(dqkv.data(), scratch.data(), wout.data(), qkv.data(), out.data(), att.data(), pos.data(), B,
                        T, C, NH, KVH);
  check_gradient("dqkv", qkv, dqkv, loss, 1e-2f, 1e-3, 2e-2, 1000);
  // Without positions: the causal op, untouched.
  std::vector<float> plain(out.size()), plain_att(att.size());
  k->attention_forward(plain.data(), plain_att.data(), qkv.data(), nullptr, B, T, C, NH, KVH);
  std::vector<float> ref(out.size()), ref_att(att.size());
  k->attention_forward(ref.data(), ref_att.data(), qkv.data(), B, T, C, NH, KVH);
  CHECK(plain == ref);
}

TEST_CASE("document positions: rotary and learned positions restart at each document", "[model][ops]") {
  auto k = kernels();
  const int B = 2, T = 7, H = 3, HS = 4, stride = 20, C = 6, V = 11;
  const std::vector<int> pos = positions_of({{2, 5}, {7}});
  std::vector<float> cs(static_cast<size_t>(T) * HS);
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < HS / 2; ++i) {
      cs[t * HS + i] = std::cos(0.3f * t * (i + 1));
      cs[t * HS + HS / 2 + i] = std::sin(0.3f * t * (i + 1));
    }
  auto x = random_vec(B * T * stride, 31);
  // Row (b, t) turns exactly as row pos[b,t] of an unmasked call does.
  std::vector<float> y(x.size()), ref(x.size());
  k->rope_forward(y.data(), x.data(), cs.data(), pos.data(), B, T, H, HS, stride);
  k->rope_forward(ref.data(), x.data(), cs.data(), B, T, H, HS, stride);
  for (int r = 0; r < B * T; ++r) {
    const int p = pos[r], b = r / T;
    std::vector<float> one(static_cast<size_t>(T) * stride, 0.0f), turned(one.size());
    std::copy(x.begin() + r * stride, x.begin() + (r + 1) * stride, one.begin() + p * stride);
    k->rope_forward(turned.data(), one.data(), cs.data(), 1, T, H, HS, stride);
    for (int c = 0; c < H * HS; ++c) REQUIRE(y[r * stride + c] == turned[p * stride + c]);
    if (b == 1) REQUIRE(std::equal(y.begin() + r * stride, y.begin() + (r + 1) * stride, ref.begin() + r * stride));
  }
  auto wout = random_vec(x.size(), 32);
  std::vector<float> dx(x.size());
  k->rope_backward(dx.data(), wout.data(), cs.data(), pos.data(), B, T, H, HS, stride);
  check_gradient("rope dinp", x, dx, [&] {
    std::vector<float> o(x.size(), 0.0f);
    k->rope_forward(o.data(), x.data(), cs.data(), pos.data(), B, T, H, HS, stride);
    double s = 0;
    for (int r = 0; r < B * T; ++r)
      for (int c = 0; c < H * HS; ++c) s += double(o[r * stride + c]) * wout[r * stride + c];
    return s;
  });
  // Learned positions: wpe row pos[b,t]; its gradient collects every token at that position.
  std::vector<int> tokens(B * T);
  for (int i = 0; i < B * T; ++i) tokens[i] = (i * 7) % V;
  auto wte = random_vec(V * C, 33), wpe = random_vec(T * C, 34), wemb = random_vec(B * T * C, 35);
  std::vector<float> emb(B * T * C), dwte(V * C, 0.0f), dwpe(T * C, 0.0f);
  auto eloss = [&] {
    k->embedding_forward(emb.data(), tokens.data(), pos.data(), wte.data(), wpe.data(), B, T, C, 0, V);
    return probe(emb, wemb);
  };
  eloss();
  for (int r = 0; r < B * T; ++r)
    for (int c = 0; c < C; ++c) REQUIRE(emb[r * C + c] == wte[tokens[r] * C + c] + wpe[pos[r] * C + c]);
  k->embedding_backward(dwte.data(), dwpe.data(), wemb.data(), tokens.data(), pos.data(), B, T, C, 0, V);
  check_gradient("dwpe", wpe, dwpe, eloss);
  check_gradient("dwte", wte, dwte, eloss);
}

TEST_CASE("targets of -1: no loss, no gradient row", "[model][ops]") {
  auto k = kernels();
  const int N = 4, Vl = 5;
  std::vector<int> targets = {2, -1, 0, -1};
  std::vector<float> losses = {1, 2, 3, 4}, dlogits(N * Vl, 0.5f);
  k->mask_losses(losses.data(), targets.data(), N);
  CHECK(losses == std::vector<float>{1, 0, 3, 0});
  k->mask_rows(dlogits.data(), targets.data(), N, Vl);
  for (int n = 0; n < N; ++n)
    for (int v = 0; v < Vl; ++v) CHECK(dlogits[n * Vl + v] == (targets[n] < 0 ? 0.0f : 0.5f));
}

namespace {

struct Run {
  std::vector<float> logits;  // (rows, Vl) in row order
  std::vector<float> grads;
  double loss = 0;
};

std::vector<float> logits_of(Gpt& gpt, int rows) {
  const size_t Vl = gpt.config().local_vocab();
  std::vector<float> all(rows * Vl);
  for (int r = 0; r < rows; ++r) gpt.read_logits(r, std::span<float>(all.data() + r * Vl, Vl));
  return all;
}

// Documents packed into sequences (lengths per row) against each document alone: the packed
// model's logits equal the document's own, and its gradient of the mean over every counted
// target equals the documents' gradients summed with their share of the targets. With
// `drop_last`, the last target of every document is -1 in the packed run (it is the next
// document's first token), and the document alone is run without its last token.
void check_documents_alone(const GptConfig& cfg, const std::vector<std::vector<int>>& docs, bool drop_last) {
  const int B = static_cast<int>(docs.size());
  const int T = std::accumulate(docs[0].begin(), docs[0].end(), 0);
  auto backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  ActivationPolicy masked_policy;
  masked_policy.document_mask = true;
  Gpt packed(cfg, backend, B, T, nullptr, 1, holmes::DType::kF32, masked_policy);
  Gpt alone(cfg, backend, 1, T);
  test::init_generic(packed, 5);
  alone.load_params(packed.read_params());
  const test::Batch batch = test::make_batch(B, T, cfg.vocab, 6);
  std::vector<int> targets = batch.targets;
  const std::vector<int> pos = positions_of(docs);
  int counted = B * T;
  if (drop_last)
    for (int i = 0; i < B * T; ++i)
      if (i % T == T - 1 || pos[i + 1] == 0) targets[i] = -1, --counted;
  packed.zero_grad();
  packed.forward(batch.tokens.data(), targets.data(), B, T, pos.data());
  const std::vector<float> got = logits_of(packed, B * T);
  // The model's mean counts a -1 target as 0 over all B*T: scale to the mean over the counted.
  packed.backward(static_cast<float>(B * T) / counted);
  alone.zero_grad();
  const size_t Vl = cfg.local_vocab();
  int start = 0;
  for (int b = 0; b < B; ++b)
    for (int len : docs[b]) {
      const int n = drop_last ? len - 1 : len;
      if (n > 0) {
        const int at = b * T + (start % T);
        alone.forward(batch.tokens.data() + at, batch.targets.data() + at, 1, n);
        const std::vector<float> own = logits_of(alone, n);
        for (int t = 0; t < n; ++t)
          for (size_t v = 0; v < Vl; ++v)
            REQUIRE(got[(at + t) * Vl + v] == Approx(own[t * Vl + v]).margin(2e-5).epsilon(1e-4));
        alone.backward(static_cast<float>(n) / counted);  // its share of the counted targets
      }
      start += len;
    }
  const float* g1 = packed.grads();
  const float* g2 = alone.grads();
  double worst = 0, scale = 0;
  for (size_t i = 0; i < packed.num_params(); ++i) {
    worst = std::max(worst, std::fabs(double(g1[i]) - g2[i]));
    scale = std::max(scale, std::fabs(double(g2[i])));
  }
  INFO("largest gradient difference " << worst << " of gradients up to " << scale);
  CHECK(worst <= 1e-5 + 1e-4 * scale);
  CHECK(scale > 1e-3);  // the comparison has something to compare
}

}  // namespace

TEST_CASE("documents packed with the document mask train as each document alone (GPT-2, Llama)", "[model]") {
  const std::vector<std::vector<int>> docs = {{3, 6, 4}, {1, 8, 4}, {13}};
  SECTION("gpt2: learned positions") {
    check_documents_alone(gpt2::config(2, 24, 3, 37, 16), docs, false);
    check_documents_alone(gpt2::config(2, 24, 3, 37, 16), docs, true);
  }
  SECTION("llama: rotary positions, grouped-query heads") {
    const GptConfig cfg = llama::config(2, 32, 4, 2, 48, 37, 16);
    check_documents_alone(cfg, docs, false);
    check_documents_alone(cfg, docs, true);
  }
}

TEST_CASE("without the document mask, packed documents see each other (the test above can fail)", "[model]") {
  // The same packed batch without positions: logits past the first document differ from the
  // document alone's, so equality above is the mask's doing.
  const GptConfig cfg = gpt2::config(1, 16, 2, 37, 8);
  auto backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  Gpt packed(cfg, backend, 1, 8), alone(cfg, backend, 1, 8);
  test::init_generic(packed, 5);
  alone.load_params(packed.read_params());
  const test::Batch batch = test::make_batch(1, 8, cfg.vocab, 6);
  packed.forward(batch.tokens.data(), batch.targets.data(), 1, 8);
  const auto got = logits_of(packed, 8);
  alone.forward(batch.tokens.data() + 3, batch.targets.data() + 3, 1, 5);
  const auto own = logits_of(alone, 5);
  double diff = 0;
  for (size_t i = 0; i < own.size(); ++i) diff = std::max(diff, std::fabs(double(got[3 * cfg.local_vocab() + i]) - own[i]));
  CHECK(diff > 1e-3);
}
