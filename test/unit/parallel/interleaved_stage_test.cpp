// The interleaved schedule through PipelineStage: p ranks (threads over in-process groups),
// each holding V model chunks (one Gpt per layer range, virtual stage c * p + s), run one
// training step. Each chunk runs the arithmetic of the 1F1B stage that holds the same layers
// in a pipeline of p V stages (the same cuts): its forwards and backwards in micro-batch
// order, the last virtual stage scaling each micro-batch's loss by 1/m. So every tensor's
// gradient (the tied embedding's two halves too: the trainer's embedding group sums them
// later) and the step's loss sum are that 1F1B pipeline's bit for bit. (Against one stage
// holding every layer, any pipeline differs in the last bits: dist_trainer_test bounds it.)
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "test/support/dist_test_util.hpp"

using namespace holmes;
using namespace holmes::parallel;
using namespace holmes::test;

namespace {

struct Grads {
  double loss_sum = 0;
  std::map<std::string, std::vector<float>> by_name;  // tensor name -> its gradient
};

void collect(const model::Gpt& gpt, Grads& out, const std::string& suffix = "") {
  for (const model::ParamTensor& t : gpt.layout().tensors()) {
    const std::string name = t.name + (t.tied_copy ? " (head copy)" : suffix);
    out.by_name[name].assign(gpt.grads() + t.offset, gpt.grads() + t.offset + t.numel);
  }
}

void fill(const DataSet& data, const spec::JobSpec& spec, int micro, int32_t* inputs, int32_t* targets) {
  const auto& t = spec.train;
  data::BatchCoord c{.step = 0, .micro = micro, .dp_rank = 0, .dp_size = 1, .micro_batch = t.micro_batch,
                     .global_batch = t.global_batch, .origin = {}};
  data.train().fill_batch(c, inputs, targets);
}

// One step on p ranks with v chunks each, virtual stage i holding layers[i] layers: the
// interleaved schedule, or with v = 1 the 1F1B pipeline of p stages.
Grads run_pipeline(const spec::JobSpec& spec, const DataSet& data, int m, int p, int v, std::vector<int> layers) {
  const Grid grid{.pp = p};
  comm::test::Job job(grid.impl, p);
  std::vector<Grads> per_rank(p);
  run_threads(p, [&](int s) {
    RankGroups groups = groups_for(job, grid, 0, 0, s);
    auto backend = backends::make_backend(backends::Device::kCpu);
    ParallelGroups pg(place_of(grid, 0, 0, s), comms_of(groups), *backend.memory);
    const schedule::PipeSchedule schedule = v > 1 ? schedule::PipeSchedule::kInterleaved : schedule::PipeSchedule::k1f1b;
    const auto steps = schedule::schedule_steps(schedule, p, s, m, v);
    std::vector<std::unique_ptr<model::Gpt>> chunks;
    std::vector<model::Gpt*> ptrs;
    for (int c = 0; c < v; ++c) {
      const int vs = schedule::virtual_stage(p, s, c);
      int first = 0;
      for (int i = 0; i < vs; ++i) first += layers[i];
      const model::GptConfig cfg = gpt_config_of(spec).shard(1, 0, first, layers[vs]);
      chunks.push_back(std::make_unique<model::Gpt>(cfg, backend, spec.train.micro_batch, spec.train.seq_len,
                                                    nullptr, schedule::max_in_flight(steps, c)));
      chunks.back()->init_weights(spec.job.seed);
      chunks.back()->zero_grad();
      ptrs.push_back(chunks.back().get());
    }
    PipelineStage stage(ptrs, pg, m, spec.train.micro_batch, spec.train.seq_len, schedule);
    std::vector<int> next(v, 0);  // each chunk's gradient passes come in micro-batch order
    per_rank[s].loss_sum = stage.run_step([&](int j, int32_t* in, int32_t* tg, int32_t*) { fill(data, spec, j, in, tg); },
                                          [&](int c, int j) {
                                            if (j != next.at(c)++) throw std::logic_error("gradient pass out of order");
                                          });
    for (int c = 0; c < v; ++c) collect(*chunks[c], per_rank[s]);
  });
  Grads all;
  for (const Grads& g : per_rank) {
    all.loss_sum += g.loss_sum;
    for (const auto& [name, grad] : g.by_name) {
      REQUIRE(all.by_name.count(name) == 0);  // every tensor on exactly one chunk
      all.by_name[name] = grad;
    }
  }
  return all;
}

// Interleaved on p ranks x v chunks against 1F1B on p v ranks with the same cuts.
void check_same(const spec::JobSpec& spec, int p, int v, const std::vector<int>& layers) {
  auto data = DataSet::open(spec);
  const int m = spec.micro_batches_per_step(1);
  const Grads got = run_pipeline(spec, *data, m, p, v, layers);
  const Grads ref = run_pipeline(spec, *data, m, p * v, 1, layers);
  CHECK(got.loss_sum > 0);
  CHECK(got.loss_sum == ref.loss_sum);
  CHECK(got.by_name.size() == ref.by_name.size());
  for (const auto& [name, grad] : ref.by_name) {
    INFO("tensor " << name);
    REQUIRE(got.by_name.count(name) == 1);
    CHECK(got.by_name.at(name) == grad);  // bit for bit
  }
}

}  // namespace

TEST_CASE("interleaved stage: 2 ranks x 2 chunks (and 3 x 2) give the 1F1B pipeline of as many stages bit for bit",
          "[train][dist][schedule]") {
  check_same(tiny_job(), 2, 2, {1, 1, 1, 1});  // 4 layers, 4 micro-batches
  auto spec = tiny_job(6);
  spec.train.global_batch = 12;  // m = 6 on 3 ranks
  check_same(spec, 3, 2, {1, 1, 1, 1, 1, 1});
}

TEST_CASE("interleaved stage: 2 ranks x 3 chunks with 8 micro-batches and uneven chunks, llama too",
          "[train][dist][schedule]") {
  auto spec = tiny_job(7);
  spec.train.global_batch = 16;  // m = 8
  for (bool llama : {false, true}) {
    INFO((llama ? "llama" : "gpt2"));
    if (llama) {
      spec.model.arch = "llama";
      spec.model.kv_heads = 2;
    }
    check_same(spec, 2, 3, {2, 1, 1, 1, 1, 1});
  }
}
