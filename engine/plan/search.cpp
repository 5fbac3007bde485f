#include "engine/plan/search.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "common/format.hpp"
#include "engine/spec/model_config.hpp"
#include "model/architecture.hpp"
#include "engine/plan/groups.hpp"
#include "engine/plan/partition.hpp"
#include "common/errors.hpp"

namespace holmes::plan {

namespace {

constexpr int kMaxAutoMicroBatch = 64;

std::string describe(int value) { return value == spec::kAuto ? "auto" : std::to_string(value); }

// What a tensor-parallel degree must divide: "model.heads = 8, model.kv_heads = 2 and
// model.ffn_hidden = 384" (model::Architecture::tp_divides).
std::string tp_divisors_text(const spec::ModelSection& m) {
  const model::GptConfig c = spec::model_config(m);
  std::vector<std::string> parts;
  for (const auto& [key, size] : c.architecture().tp_divides(c)) parts.push_back(fmt::format("{} = {}", key, size));
  const std::string last = parts.back();
  parts.pop_back();
  return parts.empty() ? last : fmt::format("{} and {}", fmt::join(parts, ", "), last);
}

// The first constraint that rules out every candidate, said with the numbers.
[[noreturn]] void explain_no_candidate(const SearchInput& in) {
  const auto& s = *in.spec;
  const auto& p = s.parallel;
  check_degrees_fit(s, in.world, fmt::format("the cluster's devices on {} node(s)", in.facts.nodes.size()));
  if (p.tensor != spec::kAuto && in.world % p.tensor != 0)
    throw UserError(fmt::format("parallel.tensor = {} does not divide the cluster's {}", p.tensor,
                                count_of(in.world, "device")));
  if (p.data != spec::kAuto && s.train.micro_batch != spec::kAuto &&
      spec::micro_batches(s.train.global_batch, s.train.micro_batch, p.data) == 0)
    throw UserError(fmt::format("train.global_batch = {} is not divisible by train.micro_batch x parallel.data = "
                                "{} x {}", s.train.global_batch, s.train.micro_batch, p.data));
  throw UserError(fmt::format(
      "no parallel layout satisfies parallel.tensor = {}, parallel.pipeline = {}, parallel.data = {} on {} devices: "
      "tensor must divide {}, pipeline must not exceed model.layers = {}, tensor x pipeline x data "
      "must equal {}, and train.global_batch = {} must be divisible by train.micro_batch = {} x data",
      describe(p.tensor), describe(p.pipeline), describe(p.data), in.world, tp_divisors_text(s.model),
      s.model.layers, in.world, s.train.global_batch, describe(s.train.micro_batch)));
}

// Whether a tensor-parallel degree t splits the model into whole heads (and whatever else the
// architecture splits: llama's key/value heads and MLP).
bool tp_divides_model(const spec::ModelSection& m, int t) { return model::tp_divides(spec::model_config(m), t); }

std::vector<int> micro_batch_options(const spec::JobSpec& s, int dp) {
  if (s.train.micro_batch != spec::kAuto) return {s.train.micro_batch};
  std::vector<int> out;
  for (int mb = 1; mb <= kMaxAutoMicroBatch; ++mb)
    if (spec::micro_batches(s.train.global_batch, mb, dp) > 0) out.push_back(mb);
  return out;
}

}  // namespace

std::vector<Degrees> degree_candidates(const SearchInput& in) {
  const auto& s = *in.spec;
  const auto& p = s.parallel;
  int node_gcd = 0;
  for (const auto& n : in.facts.nodes) node_gcd = std::gcd(node_gcd, n.devices);
  std::vector<int> tps, pps;
  if (p.tensor != spec::kAuto) tps = {p.tensor};
  else
    for (int t = 1; t <= node_gcd; ++t)
      if (node_gcd % t == 0 && tp_divides_model(s.model, t)) tps.push_back(t);
  int list_stages = static_cast<int>(p.partition.layers.size());
  if (p.pipeline != spec::kAuto) pps = {p.pipeline};
  else if (p.partition.kind == spec::PartitionKind::kList) pps = {list_stages};
  else
    for (int q = 1; q <= std::min(s.model.layers, in.world); ++q) pps.push_back(q);
  std::vector<Degrees> out;
  for (int t : tps)
    for (int q : pps) {
      if (t < 1 || q < 1 || in.world % (t * q) != 0 || !tp_divides_model(s.model, t) || q > s.model.layers) continue;
      int dp = in.world / (t * q);
      if (p.data != spec::kAuto && dp != p.data) continue;
      for (int mb : micro_batch_options(s, dp))
        if (spec::micro_batches(s.train.global_batch, mb, dp) > 0) out.push_back(Degrees{t, q, dp, mb});
    }
  if (out.empty()) explain_no_candidate(in);
  return out;
}

namespace {

// One candidate priced with the pipeline's sends in FP8 (pipe_fp8) or not.
Evaluated score_with(const SearchInput& in, const Facts& facts, const Degrees& deg, Layout layout,
                     spec::PartitionKind partition, ActivationMode mode, bool pipe_fp8) {
  const auto& s = *in.spec;
  Evaluated ev;
  ev.work.pipe_fp8 = pipe_fp8;
  ev.work.cast_s_per_value = in.cuda ? kFp8CastSPerValueGpu : kFp8CastSPerValueCpu;
  ev.work.fp8_gemms = s.train.precision == spec::Precision::kFp8;
  ev.work.fp8_lm_head = s.train.fp8_lm_head;
  ev.work.operand_cast_s_per_value = in.cuda ? kFp8OperandCastSPerValueGpu : kFp8CastSPerValueCpu;
  ev.deg = deg;
  ev.work.activation = mode;
  ev.work.activation.document_mask = s.data.document_mask;
  ev.work.shape = spec::model_config(s.model);
  ev.work.seq_len = s.train.seq_len;
  ev.work.micro_batch = deg.micro_batch;
  ev.work.global_batch = s.train.global_batch;
  ev.work.micro_batches = spec::micro_batches(s.train.global_batch, deg.micro_batch, deg.dp);
  ev.work.act_dtype = s.activation_dtype(in.cuda);
  using Staging = Workload::Staging;
  ev.work.staging = !in.cuda                                                ? Staging::kNone
                    : !in.nccl                                              ? Staging::kAll
                    : s.parallel.cross_island == spec::CrossIsland::kGloo ? Staging::kEthernet
                                                                            : Staging::kNone;
  // Blocking only in a diloco job (engine/train/run.cpp): elsewhere the loop runs it in the
  // background and no step waits for it (its bytes are still counted, replicas.cpp).
  ev.work.log_s = s.parallel.diloco() ? log_exchange_s(facts, in.table.node_of, s.log.interval) : 0;
  ev.work.runtime_bytes = in.cuda ? kCudaRuntimeBytes : 0;
  ev.stages = stage_costs(facts, in.table, layout);
  ev.layout = std::move(layout);
  int L = s.model.layers, p = deg.pp;
  auto place = [&] {
    if (partition == spec::PartitionKind::kList) ev.layers = s.parallel.partition.layers;
    else if (partition == spec::PartitionKind::kUniform) ev.layers = uniform_partition(L, p);
    else
      ev.layers = coupled_partition(ev.work, ev.stages,
                                    balanced_partition(
                                        L, p, [&](int st, int n) { return ev.stages[st].objective(ev.work, p, n); },
                                        mode.chunks),
                                    mode.chunks);
    ev.estimate = estimate_step(ev.work, ev.stages, ev.layers, in.world);
  };
  // Host emulation: under CPU quotas the pipeline sends move at the part of the wall time their
  // ends' cgroups run, which follows the step's load: the step and the shares are found
  // together (place_at_load; one pricing without quotas).
  place_at_load(ev.stages, [&]() -> const Estimate& {
    place();
    return ev.estimate;
  });
  double worst_ratio = -1;
  for (int st = 0; st < p; ++st) {
    RankMemory mem = ev.stages[st].memory(ev.work, p, ev.layers[st]);
    double ratio = mem.capacity > 0 ? mem.total() / mem.capacity : 0;
    if (mem.capacity > 0 && mem.total() > mem.capacity) ev.fits = false;
    if (ratio > worst_ratio || (worst_ratio <= 0 && mem.total() > ev.worst_memory.total())) {
      worst_ratio = std::max(ratio, worst_ratio);
      ev.worst_stage = st;
      ev.worst_memory = mem;
    }
  }
  return ev;
}

// parallel.pipe_fp8 on one candidate: as given, or (auto, with a pipeline) FP8 where the
// estimate is kPipeFp8MinGain faster with it.
Evaluated score(const SearchInput& in, const Facts& facts, const Degrees& deg, Layout layout,
                spec::PartitionKind partition, ActivationMode mode) {
  const spec::PipeFp8 choice = in.spec->parallel.pipe_fp8;
  if (choice != spec::PipeFp8::kAuto || deg.pp < 2)
    return score_with(in, facts, deg, std::move(layout), partition, mode, choice == spec::PipeFp8::kOn);
  Evaluated plain = score_with(in, facts, deg, layout, partition, mode, false);
  Evaluated fp8 = score_with(in, facts, deg, std::move(layout), partition, mode, true);
  return fp8.fits && fp8.estimate.step_time_s < (1 - kPipeFp8MinGain) * plain.estimate.step_time_s ? fp8 : plain;
}

double memory_ratio(const Evaluated& ev) {
  const RankMemory& m = ev.worst_memory;
  return m.capacity > 0 ? m.total() / m.capacity : 0;
}

constexpr double kGiB = double(1 << 30);

std::string fixed_degrees(const spec::ParallelSection& p) {
  std::vector<std::string> fixed;
  if (p.tensor != spec::kAuto) fixed.push_back(fmt::format("parallel.tensor = {}", p.tensor));
  if (p.pipeline != spec::kAuto) fixed.push_back(fmt::format("parallel.pipeline = {}", p.pipeline));
  return fmt::format("{}", fmt::join(fixed, " and "));
}

// Why no candidate fits and what would. `best` is the candidate that needs the least memory.
// Raising the tensor or pipeline degree is advice only where the spec fixed one and a copy of
// the model is not yet spread over every device; otherwise the search has tried it, and the
// cluster (its device memory) is too small: by how much, summed over every device.
std::string out_of_memory_message(const SearchInput& in, const Evaluated& best, size_t candidates) {
  const auto& s = *in.spec;
  const RankMemory& m = best.worst_memory;
  const Degrees& d = best.deg;
  std::string msg = fmt::format(
      "the plan does not fit in device memory{}: with tensor={} pipeline={} data={} micro_batch={}, stage {} needs "
      "{:.2f} GiB per device (parameters {:.2f}, gradients {:.2f}, optimizer {:.2f}, activations {:.2f}{}), {:.2f} GiB "
      "more than the {:.2f} GiB usable ({:.0f}% of the device)",
      candidates > 1 ? fmt::format(" (the least memory of all {} candidate layouts)", candidates) : "", d.tp, d.pp, d.dp,
      d.micro_batch, best.worst_stage, m.total() / kGiB, m.params / kGiB, m.grads / kGiB, m.optimizer / kGiB,
      m.activations / kGiB, m.runtime > 0 ? fmt::format(", CUDA runtime {:.2f}", m.runtime / kGiB) : "",
      (m.total() - m.capacity) / kGiB, m.capacity / kGiB, kUsableMemoryFraction * 100);
  std::vector<std::string> ways;
  // A fixed train.recompute that keeps more than full: say whether recomputing would fit.
  if (s.train.recompute != spec::Recompute::kAuto && s.train.recompute != spec::Recompute::kFull) {
    const Evaluated full = evaluate(in, d, s.parallel.placement, s.parallel.partition.kind,
                                    ActivationMode::of(spec::Recompute::kFull, best.work.activation.schedule,
                                                       best.work.activation.chunks));
    if (full.fits)
      ways.push_back(fmt::format("set train.recompute: auto (or full: stage {} then needs {:.2f} GiB, {:.4g} s per "
                                 "step instead of {:.4g} s by the estimate)",
                                 full.worst_stage, full.worst_memory.total() / kGiB, full.estimate.step_time_s,
                                 best.estimate.step_time_s));
  }
  const std::string fixed = fixed_degrees(s.parallel);
  const bool spread = d.tp * d.pp == in.world;  // every device holds a different part of one copy
  if (!fixed.empty() && !spread) ways.push_back(fmt::format("raise {} (or set auto: the planner searches)", fixed));
  // Activations scale with the micro-batch: advice only where micro_batch 1 would fit.
  const double at_one = m.total() - m.activations + m.activations / d.micro_batch;
  if (s.train.micro_batch != spec::kAuto && d.micro_batch > 1 && at_one <= m.capacity)
    ways.push_back(fmt::format("lower train.micro_batch ({}: the activations are {:.2f} GiB of the stage's need)",
                               d.micro_batch, m.activations / kGiB));
  if (fixed.empty() || spread) {
    // Every device of every stage, as the layout sizes it: tp x dp devices per stage.
    double need = 0, usable = 0;
    for (int st = 0; st < d.pp; ++st) {
      const RankMemory r = best.stages[st].memory(best.work, d.pp, best.layers[st]);
      need += r.total() * d.tp * d.dp;
      usable += r.capacity * d.tp * d.dp;
    }
    // How many more devices would do is not a division: the optimizer state spreads over the
    // data-parallel replicas more devices add. What is certain is said: the shortfall of this
    // layout in all, and the device size that would hold it.
    msg += fmt::format(
        ". The cluster is too small for this model{}: the layout needs {:.0f} GiB in all, the {} have {:.0f} GiB "
        "usable, {:.0f} GiB too little; it would fit devices of at least {:.0f} GB each",
        spread ? fmt::format(" (one copy of it already spread over all {} devices)", in.world) : "", need / kGiB,
        count_of(in.world, "device"), usable / kGiB, (need - usable) / kGiB,
        std::ceil(m.total() / kUsableMemoryFraction / 1e9));
    ways.push_back("train a smaller model (model.layers, model.hidden) or on more or larger devices");
  }
  return msg + "; " + fmt::format("{}", fmt::join(ways, "; "));
}

}  // namespace

Evaluated with_pipe_fp8(const SearchInput& in, const Evaluated& ev, spec::Placement placement,
                        spec::PartitionKind partition, bool on) {
  return score_with(in, in.facts_for(placement), ev.deg, ev.layout, partition_for(placement, partition),
                    ev.work.activation, on);
}

spec::PartitionKind partition_for(spec::Placement placement, spec::PartitionKind partition) {
  return placement != spec::Placement::kHolmes && partition == spec::PartitionKind::kAuto ? spec::PartitionKind::kUniform
                                                                                         : partition;
}

Evaluated evaluate(const SearchInput& in, const Degrees& deg, spec::Placement placement,
                   spec::PartitionKind partition, ActivationMode mode) {
  const Facts& facts = in.facts_for(placement);
  if (placement != spec::Placement::kHolmes)
    return score(in, facts, deg, naive_layout(facts, in.table, deg.tp, deg.pp, deg.dp, in.spec->parallel.order),
                 partition_for(placement, partition), mode);
  Evaluated best;
  bool have = false;
  for (const auto& order : island_orders(facts, deg.tp * deg.dp)) {
    Evaluated ev =
        score(in, facts, deg, holmes_layout(facts, in.table, deg.tp, deg.pp, deg.dp, order), partition, mode);
    auto key = [](const Evaluated& e) {
      return std::pair{e.layout.tp_groups_crossing_nodes, e.layout.dp_groups_crossing_islands};
    };
    if (!have || key(ev) < key(best) ||
        (key(ev) == key(best) && ev.estimate.step_time_s < best.estimate.step_time_s)) {
      best = std::move(ev);
      have = true;
    }
  }
  return best;
}

std::vector<ActivationMode> activation_options(const spec::JobSpec& spec) {
  using R = spec::Recompute;
  using S = spec::Schedule;
  const std::vector<R> recompute =
      spec.train.recompute != R::kAuto ? std::vector<R>{spec.train.recompute} : std::vector<R>{R::kNone, R::kSelective, R::kFull};
  const std::vector<S> schedule =
      spec.parallel.schedule != S::kAuto ? std::vector<S>{spec.parallel.schedule} : std::vector<S>{S::k1f1b, S::kZbH1};
  // interleaved: parallel.virtual_stages as given, or each of 2..kMaxAutoVirtualStages (applies()
  // drops those the degrees do not allow).
  std::vector<int> chunks;
  if (spec.parallel.virtual_stages != spec::kAuto) chunks.push_back(spec.parallel.virtual_stages);
  else
    for (int v = 2; v <= kMaxAutoVirtualStages; ++v) chunks.push_back(v);
  std::vector<ActivationMode> out;
  for (R r : recompute)
    for (S s : schedule)
      if (s != S::kInterleaved) out.push_back(ActivationMode::of(r, s));
      else
        for (int v : chunks) out.push_back(ActivationMode::of(r, s, v));
  return out;
}

namespace {

// A zero-bubble schedule splits the backward to fill a pipeline's bubble: one stage has none,
// and an auto schedule does not try it there.
// Interleaved needs what the trainer needs (engine/spec/validate.cpp checks it for fixed
// degrees): two stages or more, micro-batches in groups of pp, a layer per model chunk.
bool applies(const ActivationMode& mode, const Degrees& deg, const spec::JobSpec& spec) {
  if (mode.schedule == spec::Schedule::kInterleaved) {
    const int m = spec::micro_batches(spec.train.global_batch, deg.micro_batch, deg.dp);
    return deg.pp > 1 && m % deg.pp == 0 && spec.model.layers >= deg.pp * mode.chunks;
  }
  return deg.pp > 1 || mode.schedule == spec::Schedule::k1f1b || spec.parallel.schedule != spec::Schedule::kAuto;
}

// Fits first, then fastest; among those that do not fit, the smaller memory need.
bool better_than(const Evaluated& ev, const Evaluated& best) {
  return (ev.fits && !best.fits) ||
         (ev.fits == best.fits &&
          (ev.fits ? ev.estimate.step_time_s < best.estimate.step_time_s : memory_ratio(ev) < memory_ratio(best)));
}

}  // namespace

Evaluated search(const SearchInput& in) {
  const auto& p = in.spec->parallel;
  const std::vector<ActivationMode> modes = activation_options(*in.spec);
  Evaluated best;
  bool have = false;
  for (const Degrees& deg : degree_candidates(in))
    for (const ActivationMode& mode : modes) {
      if (!applies(mode, deg, *in.spec)) continue;
      Evaluated ev = evaluate(in, deg, p.placement, p.partition.kind, mode);
      if (!have || better_than(ev, best)) {
        best = std::move(ev);
        have = true;
      }
    }
  if (!best.fits) throw UserError(out_of_memory_message(in, best, degree_candidates(in).size()));
  return best;
}

std::optional<Evaluated> runner_up(const SearchInput& in, const Evaluated& best) {
  const auto& p = in.spec->parallel;
  std::optional<Evaluated> out;
  for (const ActivationMode& mode : activation_options(*in.spec)) {
    if (mode == best.work.activation || !applies(mode, best.deg, *in.spec)) continue;
    Evaluated ev = evaluate(in, best.deg, p.placement, p.partition.kind, mode);
    if (!out || better_than(ev, *out)) out = std::move(ev);
  }
  return out;
}

}  // namespace holmes::plan
