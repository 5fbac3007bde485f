// Harness of the distributed-trainer tests: a tiny job, the single-process reference run,
// and the same job run as tp x pp x dp ranks, one thread per rank, over in-process groups
// (rank order tp-dp-pp: tp fastest, as the plan's default).
#pragma once

#include <omp.h>

#include <chrono>
#include <functional>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <map>
#include <vector>

#include <fmt/format.h>

#include "comm/file_store.hpp"
#include "comm/inproc_group.hpp"
#include "engine/checkpoint/checkpoint.hpp"
#include "test/support/harness.hpp"
#include "engine/spec/job_spec.hpp"
#include "engine/data/data.hpp"
#include "engine/parallel/trainer.hpp"
#include "backends/backends.hpp"
#include "test/support/emulated_bf16.hpp"
#include "test/support/host_as_device.hpp"
#include "test/support/rank_plans.hpp"

namespace holmes::test {

namespace schedule = holmes::schedule;  // for test bodies that use namespace holmes::test
using namespace holmes::backends;
using namespace holmes::checkpoint;
using namespace holmes::data;
using namespace holmes::parallel;

// L=4 C=32 NH=4 V=257 (the synthetic data is byte-level) T=16, micro-batch 2 of 8.
inline spec::JobSpec tiny_job(int layers = 4) {
  spec::JobSpec s;
  s.job.seed = 4242;
  s.model.layers = layers;
  s.model.hidden = 32;
  s.model.heads = 4;
  s.model.vocab_size = 257;
  s.model.max_seq_len = 16;
  s.data.source = holmes::spec::DataSource::kSynthetic;
  s.data.synthetic.tokens = 40'000;
  s.train.steps = 6;
  s.train.micro_batch = 2;
  s.train.global_batch = 8;
  s.train.seq_len = 16;
  s.train.lr = 3e-3;
  s.train.min_lr = 3e-4;
  s.train.warmup_steps = 2;
  s.train.grad_clip = 0.5;  // low enough that clipping acts on most steps
  s.train.eval_steps = 3;
  return s;
}

struct Grid {
  int tp = 1, pp = 1, dp = 1;
  std::vector<int> layers = {};  // per stage (parallel.partition list); empty = as even as possible
  size_t bucket_floats = 0;  // 0 = the plan's
  comm::test::Impl impl = comm::test::Impl::kInProcess;
  bool device_memory = false;  // ranks on host_as_device_backend(): the GPU's staged paths
  bool device_groups = false;  // with device_memory: a second set of groups for device buffers
                               // only (as NCCL groups are), beside host-only groups
  bool bf16 = false;           // ranks on the CPU's emulated bf16 kernels (spec must say bf16)
  int slow_gather_ms = 0;      // > 0: each dp all-gather starts that late (SlowGatherGroup)
  // Checkpoints of the trainer's shard_states(): save_dir non-empty: after save_after steps
  // every rank saves into save_dir (save_checkpoint, collective over a file store) and trains
  // on; resume non-empty: every rank loads that step folder (weights and moments,
  // load_shard_states + upload_shard_state) and trains from its step to train.steps.
  std::string save_dir = {}, resume = {};
  int save_after = 0;
  int world() const { return tp * pp * dp; }
  int rank(int t, int d, int p) const { return t + tp * (d + dp * p); }
};

// What one run leaves behind on one rank.
struct RankRun {
  int tp_rank = 0, pp_stage = 0, dp_rank = 0;
  int64_t first_step = 0;  // steps[i] is step first_step + i (Grid::resume: the checkpoint's step)
  std::vector<StepStats> steps;
  double eval = 0;
  std::vector<float> params;
  model::ParamLayout layout;
  model::GptConfig config;
  std::vector<std::pair<size_t, size_t>> owned;
  size_t bucket_count = 0;
  int overlapped = 0;  // buckets reduce-scattered during the last step's backward
  long device_calls = 0;  // operations the device groups ran (Grid::device_groups)
  std::string queue_problems;  // Grid::device_groups: operations given the wrong queue
  long queue_orders = 0;       // and the side/compute orderings the rank made
  int gathers_deferred = 0;    // parameter all-gathers the evaluation's forward waited for
  long device_spans = 0;       // Grid::device_groups: spans of the compute queue timed by the device
  std::map<std::string, std::vector<float>> by_name;  // final weights of every chunk, by tensor name
  int chunks = 1;                                     // model chunks of the stage (interleaved: V)
  // The chunk holding a tied embedding summed over the embedding group (-1: none), where the
  // last step posted that sum (DistOptimizer::tied_post), and that chunk's layout.
  int tied_chunk = -1;
  DistOptimizer::TiedPost tied_post;
  model::ParamLayout tied_layout;
  std::string numerics;                               // Trainer::numerics()
};

// A group whose all-gathers start `ms` late: a forward that reads parameters before their
// all-gather landed then reads the previous step's, and its numbers differ.
class SlowGatherGroup final : public comm::ProcessGroup {
 public:
  SlowGatherGroup(std::unique_ptr<comm::ProcessGroup> inner, int ms)
      : ProcessGroup(inner->spec()), inner_(std::move(inner)), ms_(ms) {}
  std::string transport() const override { return inner_->transport(); }
  void all_reduce(std::span<float> d, comm::ReduceOp op, const comm::OpOptions& o = {}) override {
    inner_->all_reduce(d, op, o);
  }
  void reduce_scatter(std::span<float> out, std::span<const float> in, comm::ReduceOp op,
                      const comm::OpOptions& o = {}) override {
    inner_->reduce_scatter(out, in, op, o);
  }
  void all_gather(std::span<float> out, std::span<const float> in, const comm::OpOptions& o = {}) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms_));
    inner_->all_gather(out, in, o);
  }
  void broadcast(std::span<float> d, int root, const comm::OpOptions& o = {}) override { inner_->broadcast(d, root, o); }
  void send_recv(std::span<const comm::P2POp> ops, const comm::OpOptions& o = {}) override { inner_->send_recv(ops, o); }
  using comm::ProcessGroup::all_to_all_v;
  void all_to_all_v(void* out, std::span<const size_t> out_counts, const void* in, std::span<const size_t> in_counts,
                    comm::DType dtype, const comm::OpOptions& o = {}) override {
    inner_->all_to_all_v(out, out_counts, in, in_counts, dtype, o);
  }
  void barrier(const comm::OpOptions& o = {}) override { inner_->barrier(o); }

 private:
  std::unique_ptr<comm::ProcessGroup> inner_;
  int ms_;
};

struct Reference {
  std::vector<StepStats> steps;
  double eval = 0;
  std::vector<float> params;
  model::ParamLayout layout;
};

inline Reference run_reference(const spec::JobSpec& spec) {
  auto data = DataSet::open(spec);
  auto backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  Trainer trainer(spec, single_rank_plan(spec), backend, *data);
  Reference r;
  for (int64_t s = 0; s < spec.train.steps; ++s) r.steps.push_back(trainer.train_step(s));
  r.eval = trainer.evaluate();
  r.params.assign(trainer.model().params(), trainer.model().params() + trainer.model().num_params());
  r.layout = trainer.model().layout();
  return r;
}

// Runs body(rank) on n threads (one BLAS/OpenMP thread each: 2 cores are shared by up to
// 8 rank threads; 2 and 4 threads per rank pass too) and rethrows the first error.
inline void run_threads(int n, const std::function<void(int)>& body) {
  comm::test::run_ranks(n, [&](int rank) {
    omp_set_num_threads(1);
    body(rank);
  });
}

struct RankGroups {
  std::unique_ptr<comm::ProcessGroup> tp, pp, dp, embedding;
};

// The groups of one rank (names say which slice of the grid), from `job`: in-process, or
// Gloo over loopback with `store` this rank's connection to the job's store.
inline RankGroups make_groups(comm::test::Job& job, const std::shared_ptr<comm::Store>& store, const Grid& g, int t,
                              int d, int p, std::chrono::milliseconds timeout, const std::string& prefix = "") {
  RankGroups out;
  const int me = g.rank(t, d, p);
  auto group = [&](const std::string& name, std::vector<int> members) {
    return job.group(store, prefix + name, std::move(members), me, timeout);
  };
  std::vector<int> m;
  if (g.tp > 1) {
    for (int i = 0; i < g.tp; ++i) m.push_back(g.rank(i, d, p));
    out.tp = group(fmt::format("tp/pp{}/dp{}", p, d), m);
  }
  if (g.dp > 1) {
    m.clear();
    for (int i = 0; i < g.dp; ++i) m.push_back(g.rank(t, i, p));
    out.dp = group(fmt::format("dp/pp{}/tp{}", p, t), m);
  }
  if (g.pp > 1) {
    m.clear();
    for (int i = 0; i < g.pp; ++i) m.push_back(g.rank(t, d, i));
    out.pp = group(fmt::format("pp/dp{}/tp{}", d, t), m);
    if (p == 0 || p == g.pp - 1)
      out.embedding = group(fmt::format("emb/dp{}/tp{}", d, t), {g.rank(t, d, 0), g.rank(t, d, g.pp - 1)});
  }
  return out;
}

// Groups of rank (t, d, p) for a test job (the store only where the job uses Gloo).
inline RankGroups groups_for(comm::test::Job& job, const Grid& g, int t, int d, int p,
                             std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  std::shared_ptr<comm::Store> store;
  if (job.impl() == comm::test::Impl::kGloo) store = job.store_for(g.rank(t, d, p));
  return make_groups(job, store, g, t, d, p, timeout);
}

// Where rank (t, d, p) sits, and this stage's layers.
inline schedule::Place place_of(const Grid& g, int t, int d, int p) {
  schedule::Place place;
  place.at[schedule::Axis::kTp] = t, place.at[schedule::Axis::kDp] = d, place.at[schedule::Axis::kPp] = p;
  place.size = schedule::AxisDegrees{{schedule::Axis::kTp, g.tp}, {schedule::Axis::kPp, g.pp}, {schedule::Axis::kDp, g.dp}};
  return place;
}

// The plan of rank `rank` of the grid (its layers and bucket size as the grid says).
inline schedule::RankPlan grid_rank_plan(const spec::JobSpec& spec, const Grid& g, int rank) {
  schedule::RankPlan rp = test_rank_plan(spec, g.tp, g.pp, g.dp, rank, g.layers);
  if (g.bucket_floats > 0) rp.bucket_floats = g.bucket_floats;
  return rp;
}

// The groups of one rank as ParallelGroups takes them: host groups and, where given, device
// groups of the same members.
inline std::vector<GroupComms> comms_of(const RankGroups& host, const RankGroups& device = {}) {
  std::vector<GroupComms> out;
  auto add = [&](schedule::GroupKind kind, const std::unique_ptr<comm::ProcessGroup>& h,
                 const std::unique_ptr<comm::ProcessGroup>& d) {
    if (h) out.push_back({kind, h.get(), d.get()});
  };
  add(schedule::kTpGroup, host.tp, device.tp);
  add(schedule::kPpGroup, host.pp, device.pp);
  add(schedule::kDpGroup, host.dp, device.dp);
  add(schedule::kEmbeddingGroup, host.embedding, device.embedding);
  return out;
}

// The job on every rank of the grid; result index = global rank.
inline std::vector<RankRun> run_grid(const spec::JobSpec& spec, const Grid& g) {
  auto data = DataSet::open(spec);
  comm::test::Job job(g.impl, g.world());
  std::vector<RankRun> runs(g.world());
  std::unique_ptr<comm::FileStore> save_store;
  if (!g.save_dir.empty())
    save_store = std::make_unique<comm::FileStore>(g.save_dir + "/.store", "grid", std::chrono::seconds(60));
  std::optional<CheckpointInfo> resume;
  if (!g.resume.empty()) resume = open_checkpoint(g.resume);
  const plan::Plan job_plan = test_plan(spec, g.tp, g.pp, g.dp, g.layers);
  run_threads(g.world(), [&](int rank) {
    const int t = rank % g.tp, d = (rank / g.tp) % g.dp, p = rank / (g.tp * g.dp);
    schedule::RankPlan rank_plan = plan::rank_plan(job_plan, rank);
    if (g.bucket_floats > 0) rank_plan.bucket_floats = g.bucket_floats;
    RankGroups groups = groups_for(job, g, t, d, p);
    auto backend = g.device_memory ? host_as_device_backend()
                   : g.bf16        ? holmes::model::test::emulated_bf16_backend()
                                   : holmes::backends::make_backend(holmes::backends::Device::kCpu);
    if (g.slow_gather_ms > 0 && groups.dp) groups.dp = std::make_unique<SlowGatherGroup>(std::move(groups.dp), g.slow_gather_ms);
    if (g.device_memory)  // the real groups refuse device buffers: the trainer must stage them
      for (auto* grp : {&groups.tp, &groups.pp, &groups.dp, &groups.embedding})
        if (*grp) *grp = std::make_unique<HostOnlyGroup>(std::move(*grp), *backend.memory);
    RankGroups device;
    if (g.device_memory && g.device_groups) {  // device buffers must go here, host ones must not
      device = make_groups(job, nullptr, g, t, d, p, std::chrono::seconds(30), "device/");
      for (auto* grp : {&device.tp, &device.pp, &device.dp, &device.embedding})
        if (*grp) *grp = std::make_unique<DeviceOnlyGroup>(std::move(*grp), *backend.memory);
    }
    ParallelGroups pg(rank_plan.place, comms_of(groups, device), *backend.memory);
    Trainer trainer(spec, rank_plan, backend, *data, &pg);
    RankRun& r = runs[rank];
    r.tp_rank = t;
    r.dp_rank = d;
    r.pp_stage = p;
    if (resume) {
      std::vector<ShardState> states = trainer.shard_states();
      load_shard_states(*resume, gpt_config_of(spec), states, /*with_optimizer=*/true);
      trainer.upload_shard_state();
      r.first_step = resume->step;
    }
    for (int64_t s = r.first_step; s < spec.train.steps; ++s) {
      r.steps.push_back(trainer.train_step(s));
      if (save_store && s + 1 == g.save_after) {
        SaveContext c;
        c.rank = rank;
        c.world = g.world();
        c.store = save_store.get();
        c.step = s + 1;
        c.model = gpt_config_of(spec);
        save_checkpoint(g.save_dir, trainer.shard_states(), c);
      }
    }
    r.eval = trainer.evaluate();
    r.chunks = trainer.chunk_count();
    r.numerics = trainer.numerics();
    for (int c = 0; c < trainer.chunk_count(); ++c) {  // every chunk's weights by tensor name
      model::Gpt& chunk = trainer.chunk(c);
      std::vector<float> w(chunk.num_params());
      chunk.read_params(w);
      for (const model::ParamTensor& tensor : chunk.layout().tensors())
        r.by_name[tensor.name + (tensor.tied_copy ? " (head copy)" : "")].assign(
            w.begin() + tensor.offset, w.begin() + tensor.offset + tensor.numel);
    }
    for (int c = 0; c < trainer.chunk_count(); ++c)
      if (trainer.optimizer(c).tied_post().posted) {
        r.tied_chunk = c;
        r.tied_post = trainer.optimizer(c).tied_post();
        r.tied_layout = trainer.chunk(c).layout();
      }
    if (trainer.chunk_count() > 1) return;  // interleaved: no one-shard view (Trainer::shard_state)
    ShardState st = trainer.shard_state();
    r.params.assign(st.params, st.params + st.layout->size());
    r.layout = *st.layout;
    r.config = *st.config;
    r.owned = st.owned;
    r.bucket_count = trainer.optimizer().buckets().size();
    r.overlapped = trainer.optimizer().overlapped();
    r.gathers_deferred = trainer.optimizer().gathers_deferred();
    for (auto* grp : {&device.tp, &device.pp, &device.dp, &device.embedding})
      if (*grp) r.device_calls += static_cast<DeviceOnlyGroup&>(**grp).calls();
    if (g.device_groups) {  // which queue each kind of operation was given
      auto& mem = static_cast<HostAsDevice&>(*backend.memory);
      const std::set<void*> compute{mem.stream()}, side{mem.side_stream()};
      auto expect = [&](const std::unique_ptr<comm::ProcessGroup>& grp, const char* op, const std::set<void*>& want,
                        const char* what) {
        if (!grp) return;
        const auto& seen = static_cast<DeviceOnlyGroup&>(*grp).streams();
        auto it = seen.find(op);
        if (it != seen.end() && it->second != want) r.queue_problems += fmt::format("{} {} not on {}; ", grp->name(), op, what);
      };
      expect(device.dp, "reduce_scatter", side, "the side queue");
      expect(device.dp, "all_gather", side, "the side queue");
      expect(device.embedding, "all_reduce", side, "the side queue");  // the tied embedding's sum
      expect(device.tp, "all_reduce", compute, "the compute queue");
      expect(device.pp, "send_recv", compute, "the compute queue");
      // The pipeline's received slices, all-gathered over the tp group beside the compute
      // (PipelineStage::await), which then waits for each.
      expect(device.tp, "all_gather", side, "the side queue");
      // Each reduce-scatter and each all-gather starts after what the compute queue holds;
      // the compute queue waits for each one's fence before the kernels that read its result
      // (a fence per bucket: the reduce-scatters of each step, the all-gathers of each update).
      auto count = [](const std::unique_ptr<comm::ProcessGroup>& grp, const char* op) {
        return grp ? static_cast<DeviceOnlyGroup&>(*grp).count(op) : 0L;
      };
      const long scatters = count(device.dp, "reduce_scatter"), gathers = count(device.dp, "all_gather");
      const long slices = count(device.tp, "all_gather");
      const long sums = count(device.embedding, "all_reduce"), side_ops = scatters + gathers + sums + slices;
      if (device.tp && g.pp > 1 && slices == 0)
        r.queue_problems += "no all-gather of the pipeline's received slices on the tp group; ";
      const long updates = device.dp ? spec.train.steps : 0;
      if (scatters != updates * static_cast<long>(r.bucket_count) || gathers != scatters)
        r.queue_problems += fmt::format("{} reduce-scatters and {} all-gathers in {} steps of {} buckets; ", scatters,
                                        gathers, updates, r.bucket_count);
      if (device.embedding && sums != spec.train.steps)
        r.queue_problems += fmt::format("{} tied-embedding sums in {} steps; ", sums, spec.train.steps);
      if (mem.orders_to_side() != side_ops)
        r.queue_problems += fmt::format("{} orders before {} operations on the side queue; ", mem.orders_to_side(),
                                        side_ops);
      const long lands = mem.holds(mem.side_stream(), mem.stream());
      if (lands != side_ops)
        r.queue_problems += fmt::format("{} fences of the side queue held the compute queue, for {} operations; ", lands,
                                        side_ops);
      r.queue_orders = mem.orders_to_side() + mem.orders_to_compute();
      // Every operation queued on the compute queue, and every wait of that queue for the
      // side queue, is timed by the device: two timed fences each.
      const long spans = count(device.tp, "all_reduce") + count(device.pp, "send_recv") + lands;
      if (mem.timed_fences() != 2 * spans)
        r.queue_problems += fmt::format("{} timed fences for {} spans on the compute queue; ", mem.timed_fences(), spans);
      r.device_spans = spans;
    }
  });
  return runs;
}

}  // namespace holmes::test
