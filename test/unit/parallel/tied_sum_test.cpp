// The tied embedding's sum over the embedding group (first and last pipeline stage) runs
// beside the compute: each end posts it as soon as the model reports its share final (the
// last stage after its last micro-batch's head weight gradient, the first after the
// embedding's, which a W pass runs before the blocks' W) and waits for it only where the sum
// is read. Observed without timing: the order in which the model reports, where each
// optimizer posted the sum, and a last stage that gets through its gradient norm while the
// first stage has not even started its backward (a synchronous sum could not).
#include <catch2/catch.hpp>

#include <future>
#include <limits>

#include "engine/parallel/dist_optimizer.hpp"
#include "test/support/dist_test_util.hpp"
#include "test/support/same_runs.hpp"
#include "model/gpt2/gpt2.hpp"

using namespace holmes;
using namespace holmes::parallel;
using namespace holmes::test;
using holmes::spec::Schedule;

namespace {

model::GptConfig four_layers() { return model::gpt2::config(4, 32, 4, 97, 16); }

std::vector<int> ids(int n, int V, int salt) {
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = (i * 29 + salt * 13 + i / 5) % V;
  return v;
}

constexpr size_t kTied = std::numeric_limits<size_t>::max();  // the tied hook in a trace

// Where the first / last stage of every tied layout must have posted its sum: during the
// step's last backward, with `ahead` floats of other gradients still to be reported.
void check_posts(const std::vector<RankRun>& runs, int pp, bool split) {
  int ends = 0;
  for (const RankRun& r : runs) {
    INFO("rank tp" << r.tp_rank << " pp" << r.pp_stage << " dp" << r.dp_rank);
    const bool end = r.pp_stage == 0 || r.pp_stage == pp - 1;
    CHECK((r.tied_chunk >= 0) == end);
    if (r.tied_chunk < 0) continue;
    ++ends;
    CHECK(r.tied_post.in_backward);
    const model::ParamLayout& l = r.tied_layout;
    const model::ParamTensor& wte = *l.find("wte");
    size_t blocks = 0, others = 0;  // floats of the blocks, of the embedding's other tensors
    for (const auto& t : l.tensors()) {
      if (t.layer >= 0) blocks += t.numel;
      else if (&t != &wte && r.pp_stage == 0) others += t.numel;
    }
    if (wte.tied_copy)  // after the head: every block still to come
      CHECK(r.tied_post.ahead == blocks);
    else if (split)  // at the start of the last W pass: all of it but wte
      CHECK(r.tied_post.ahead == l.size() - wte.numel);
    else  // at the end of the last backward: wpe, reported with wte
      CHECK(r.tied_post.ahead == others);
  }
  CHECK(ends == 2 * static_cast<int>(runs.size()) / pp);
}

}  // namespace

TEST_CASE("Gpt reports a tied embedding's share before the blocks' W in a W pass, after them in one pass",
          "[train][dist][tied]") {
  auto backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  const int B = 1, T = 4, N = B * T;
  const auto tok = ids(N, 97, 1), tgt = ids(N, 97, 2);
  for (const bool split : {false, true})
    for (const int first : {0, 2}) {  // the first stage (wte), the last (its tied copy)
      INFO((split ? "B then W" : "one pass") << ", stage of layers " << first << "..");
      const model::GptConfig cfg = four_layers().shard(1, 0, first, 2);
      model::ActivationPolicy policy;
      policy.split_backward = split;
      model::Gpt gpt(cfg, backend, B, T, nullptr, 1, holmes::DType::kF32, policy);
      gpt.init_weights(3);
      std::vector<std::pair<size_t, size_t>> trace;
      gpt.set_grad_ready_hook([&](size_t b, size_t e) { trace.emplace_back(b, e); });
      gpt.set_tied_grad_hook([&] { trace.emplace_back(kTied, kTied); });
      std::vector<float> input(static_cast<size_t>(N) * cfg.hidden, 0.05f), dout(input.size(), 0.01f);
      gpt.zero_grad();
      gpt.forward_stage(first == 0 ? tok.data() : nullptr, first == 0 ? nullptr : input.data(),
                        first == 0 ? nullptr : tgt.data(), B, T);
      const model::Pass pass = split ? model::Pass::kInput : model::Pass::kAll;
      if (first == 0) gpt.backward_stage(dout.data(), pass);
      else gpt.backward(1.0f, pass);
      if (split) {
        CHECK(trace.empty());  // B completes no weight gradient
        gpt.backward_weights();
      }
      // Two blocks, the head's or the embedding's range, the tied share once.
      REQUIRE(trace.size() == 4);
      if (first > 0) {  // head, tied, blocks
        CHECK(trace[0].second == gpt.num_params());
        CHECK(trace[1].first == kTied);
      } else if (split) {  // tied, blocks, embedding
        CHECK(trace[0].first == kTied);
        CHECK(trace[3].first == 0);
      } else {  // blocks, tied, embedding
        CHECK(trace[2].first == kTied);
        CHECK(trace[3].first == 0);
      }
    }
}

TEST_CASE("tied embedding: the last stage gets through its gradient norm before the first stage's backward, "
          "and both ends get a + b",
          "[train][dist][tied]") {
  const model::GptConfig full = four_layers();
  const int B = 2, T = 8, N = B * T;
  const Grid g{.pp = 2};
  comm::test::Job job(comm::test::Impl::kInProcess, 2);
  std::promise<void> past_norm;  // the last stage's norm is in
  std::shared_future<void> past = past_norm.get_future().share();
  bool first_waited_in_vain = false;
  std::vector<float> share[2], summed[2];
  DistOptimizer::TiedPost posts[2];
  run_threads(2, [&](int p) {
    RankGroups groups = groups_for(job, g, 0, 0, p);
    auto backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
    ParallelGroups pg(place_of(g, 0, 0, p), comms_of(groups), *backend.memory);
    model::Gpt gpt(full.shard(1, 0, 2 * p, 2), backend, B, T);
    gpt.init_weights(11 + p);
    DistOptimizer opt(gpt, pg);
    const model::ParamTensor& wte = *gpt.layout().find("wte");
    const auto tok = ids(N, 97, 3), tgt = ids(N, 97, 4);
    std::vector<float> act(static_cast<size_t>(N) * full.hidden, 0.02f), dout(act.size(), 0.003f);
    gpt.zero_grad();
    if (p == 0) {
      // A synchronous sum would hold the last stage in finish_grads until this stage's
      // backward: the bound only ends such a deadlock (the test then fails), it times nothing.
      first_waited_in_vain = past.wait_for(std::chrono::seconds(120)) != std::future_status::ready;
      gpt.forward_stage(tok.data(), nullptr, nullptr, B, T);
      gpt.backward_stage(dout.data());  // not armed: the sum is posted in finish_grads
    } else {
      gpt.forward_stage(nullptr, act.data(), tgt.data(), B, T);
      opt.arm();
      gpt.backward();  // posts the sum; it waits for the first stage's share
    }
    // Nothing writes the sum before both ends posted, and the first stage posts below.
    share[p].assign(gpt.grads() + wte.offset, gpt.grads() + wte.offset + wte.numel);
    opt.finish_grads();
    std::vector<double> sq(norm_units(full.layers), 0.0);
    opt.add_owned_grad_sq(sq);
    if (p == 1) past_norm.set_value();
    opt.update(AdamWHyper{}, 1, 1.0f);  // lands the last stage's sum
    summed[p].assign(gpt.grads() + wte.offset, gpt.grads() + wte.offset + wte.numel);
    posts[p] = opt.tied_post();
  });
  CHECK_FALSE(first_waited_in_vain);
  CHECK(posts[1].in_backward);
  CHECK_FALSE(posts[0].in_backward);
  REQUIRE(share[0].size() == share[1].size());
  CHECK(share[0] != share[1]);
  size_t wrong = 0;
  for (size_t i = 0; i < share[0].size(); ++i) wrong += summed[0][i] != share[0][i] + share[1][i];
  CHECK(wrong == 0);
  CHECK(summed[1] == summed[0]);
}

TEST_CASE("tied embedding: every pipeline layout posts the sum during the last backward, 1f1b's numbers unchanged",
          "[train][dist][tied][schedule]") {
  auto spec = tiny_job();
  spec.train.steps = 2;
  struct Case {
    const char* name;
    Grid g;
    Schedule schedule;
  };
  const Case cases[] = {
      {"pp2 1f1b", {.pp = 2}, Schedule::k1f1b},
      {"pp2 zb-h1", {.pp = 2}, Schedule::kZbH1},
      {"pp2 x dp2 zb-h1", {.pp = 2, .dp = 2, .bucket_floats = 900}, Schedule::kZbH1},
      {"tp2 x pp2 1f1b", {.tp = 2, .pp = 2}, Schedule::k1f1b},
      {"tp2 x pp2 zb-h1", {.tp = 2, .pp = 2}, Schedule::kZbH1},
      {"pp3 zb-h1", {.pp = 3, .layers = {1, 2, 1}}, Schedule::kZbH1},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    spec.parallel.schedule = Schedule::k1f1b;
    const std::vector<RankRun> ref = run_grid(spec, c.g);
    spec.parallel.schedule = c.schedule;
    const std::vector<RankRun> got = c.schedule == Schedule::k1f1b ? ref : run_grid(spec, c.g);
    check_posts(got, c.g.pp, c.schedule == Schedule::kZbH1);
    check_same_runs(got, ref);
    for (const RankRun& r : got)  // the tied copies equal
      if (r.pp_stage == c.g.pp - 1)
        CHECK(r.by_name.at("wte (head copy)") == got[c.g.rank(r.tp_rank, r.dp_rank, 0)].by_name.at("wte"));
  }
  SECTION("interleaved, pp2 x dp2, V=2: chunk 0 of the first stage, chunk 1 of the last") {
    spec.parallel.schedule = Schedule::kInterleaved;
    spec.parallel.virtual_stages = 2;
    const Grid g{.pp = 2, .dp = 2};
    const std::vector<RankRun> got = run_grid(spec, g);
    check_posts(got, 2, false);
    for (const RankRun& r : got) CHECK(r.tied_chunk == (r.pp_stage == 0 ? 0 : 1));
  }
}
