#include "engine/parallel/trainer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <stdexcept>
#include <utility>

#include "comm/errors.hpp"
#include "common/errors.hpp"
#include "engine/parallel/cpu_clock.hpp"
#include "engine/spec/model_config.hpp"

namespace holmes::parallel {

model::GptConfig gpt_config_of(const spec::JobSpec& spec) { return spec::model_config(spec.model); }

LrConfig lr_config_of(const spec::JobSpec& spec) {
  const auto& t = spec.train;
  const int64_t per_step = static_cast<int64_t>(t.global_batch) * t.seq_len;  // tokens of a step at full strength
  return {.lr = t.lr, .min_lr = t.min_lr,
          .warmup_tokens = t.warmup_tokens > 0 ? t.warmup_tokens : t.warmup_steps * per_step,
          .total_tokens = t.decay_tokens > 0 ? t.decay_tokens : t.steps * per_step, .kind = t.lr_schedule};
}

AdamWHyper adamw_hyper_of(const spec::JobSpec& spec) {
  const auto& t = spec.train;
  return {.lr = static_cast<float>(t.lr), .beta1 = static_cast<float>(t.beta1), .beta2 = static_cast<float>(t.beta2),
          .eps = static_cast<float>(t.eps), .weight_decay = static_cast<float>(t.weight_decay)};
}

data::BatchCoord validation_coord(const schedule::RankPlan& plan, int index) {
  const int m = plan.micro_batches;
  return data::BatchCoord{.step = index / m, .micro = index % m, .dp_rank = plan.place.data_rank(),
                          .dp_size = plan.place.data_size(), .micro_batch = plan.micro_batch,
                          .global_batch = plan.global_batch, .origin = {}};
}

namespace {

// Model chunk `chunk` of `chunks` on this stage: the embedding only on virtual stage 0 (layer
// 0), the head only on the last (it ends at L).
model::GptConfig stage_config(const spec::JobSpec& spec, const schedule::Place& c, int first_layer, int num_layers,
                              int chunk = 0, int chunks = 1) {
  const model::GptConfig full = gpt_config_of(spec);
  const int L = full.layers;
  const int n = num_layers < 0 ? L - first_layer : num_layers;
  const bool first = c[schedule::Axis::kPp] == 0 && chunk == 0, last = c[schedule::Axis::kPp] == c.degree(schedule::Axis::kPp) - 1 && chunk == chunks - 1;
  // The spec's rules (spec::cross_field_problems) and the plan made these hold; a context that
  // breaks them is a wiring error, not the user's.
  if (first_layer < 0 || n < (chunks > 1 ? 1 : 0) || first_layer + n > L || first != (first_layer == 0) ||
      last != (first_layer + n == L) || full.heads % c.degree(schedule::Axis::kTp) != 0 || full.hidden % c.degree(schedule::Axis::kTp) != 0 ||
      full.kv_heads % c.degree(schedule::Axis::kTp) != 0)
    throw std::invalid_argument(fmt::format("Trainer: stage {} of {} (chunk {} of {}) with layers [{}, {}) of {} and "
                                            "tensor degree {} does not fit a model of {} heads, hidden {}", c[schedule::Axis::kPp],
                                            c.degree(schedule::Axis::kPp), chunk, chunks, first_layer, first_layer + n, L, c.degree(schedule::Axis::kTp),
                                            full.heads, full.hidden));
  return full.shard(c.degree(schedule::Axis::kTp), c[schedule::Axis::kTp], first_layer, n);
}

}  // namespace

Trainer::Trainer(const spec::JobSpec& spec, const schedule::RankPlan& plan, model::Backend& backend,
                 const data::DataSet& data, ParallelGroups* groups)
    : spec_(spec), plan_(plan), data_(data), own_groups_(groups ? nullptr : std::make_unique<ParallelGroups>()),
      groups_(groups ? groups : own_groups_.get()), c_(plan_.place), hsdp_(plan.outer.mode == spec::OuterMode::kSync) {
  using schedule::Axis;
  // Start-up and the tests make both from one plan; a mismatch is a wiring error.
  for (Axis a : schedule::kAllAxes)
    if (groups_->group(a).size() != c_.degree(a) || groups_->group(a).rank() != c_[a])
      throw std::invalid_argument(fmt::format("Trainer: the plan puts rank {} at {} {} of {}, its groups at {} of {}",
                                              plan_.rank, schedule::axis_name(a), c_[a], c_.degree(a),
                                              groups_->group(a).rank(), groups_->group(a).size()));
  if (c_.degree(Axis::kTp) > 1) tp_comm_ = std::make_unique<GroupTensorParallel>(groups_->group(Axis::kTp));
  const int v = static_cast<int>(plan_.chunks.size());
  if (v < 1 || (plan_.schedule == schedule::PipeSchedule::kInterleaved) != (v > 1))
    throw std::invalid_argument(fmt::format("Trainer: {} model chunks under schedule {}", v,
                                            schedule::pipe_schedule_name(plan_.schedule)));
  if (v > 1 && c_.degree(Axis::kReplica) > 1)  // spec::cross_field_problems refuses diloco + interleaved
    throw std::invalid_argument("Trainer: diloco replicas with model chunks (interleaved)");
  std::vector<model::Gpt*> models;
  for (int k = 0; k < v; ++k) {
    const schedule::LayerRange& r = plan_.chunks[k];
    const model::GptConfig cfg = stage_config(spec, c_, r.first_layer, r.num_layers, k, v);
    chunks_.push_back(std::make_unique<model::Gpt>(cfg, backend, plan_.micro_batch, plan_.seq_len, tp_comm_.get(),
                                                   schedule::max_in_flight(plan_.steps, k),
                                                   precision_of(plan_.precision, backend), activation_policy(plan_),
                                                   fp8_recipe_of(plan_, backend)));
    chunks_.back()->init_weights(spec.job.seed);
    models.push_back(chunks_.back().get());
  }
  gpt_ = chunks_.front().get();
  stage_ = std::make_unique<PipelineStage>(models, *groups_, plan_);
  for (int k = 0; k < v; ++k)
    optimizers_.push_back(std::make_unique<DistOptimizer>(*chunks_[k], *groups_, plan_.bucket_floats));
  optimizer_ = optimizers_.front().get();
  lr_ = lr_config_of(spec);
  hyper_ = adamw_hyper_of(spec);
  // Test hook (docs/launch.md): HOLMES_TEST_SLOW_RANK="RANK:MS" makes every forward pass of that
  // rank sleep MS more, a straggler the log must name.
  if (const char* hook = std::getenv("HOLMES_TEST_SLOW_RANK")) {
    long long rank = -1, ms = -1;
    char extra = 0;
    if (std::sscanf(hook, "%lld:%lld%c", &rank, &ms, &extra) != 2 || rank < 0 || ms < 1 || ms > 60000)
      throw UserError(fmt::format("HOLMES_TEST_SLOW_RANK: '{}' is not accepted, expected RANK:MS (MS in 1..60000)", hook));
    if (rank == plan_.rank) stage_->set_test_pass_delay_ms(static_cast<int>(ms));
  }
  if (c_.degree(Axis::kReplica) > 1) {
    if (!hsdp_)
      outer_ = std::make_unique<OuterSync>(
          plan_.outer, groups_->group(Axis::kReplica), groups_->group(Axis::kDp), gpt_->num_params(),
          &groups_->group(schedule::GroupKind{Axis::kReplica, schedule::Purpose::kSide}));
    reset_outer();
    replica_id_ = c_[Axis::kReplica];
    for (int r = 0; r < c_.degree(Axis::kReplica); ++r) replicas_.push_back(r);
    // Test hook (docs/launch.md): HOLMES_TEST_NAN_LOSS="STEP:REPLICA" makes that replica's
    // loss of step STEP (1-based) NaN on its ranks, as a diverged replica's would be.
    if (const char* hook = std::getenv("HOLMES_TEST_NAN_LOSS")) {
      long long at = -1, replica = -1;
      if (std::sscanf(hook, "%lld:%lld", &at, &replica) == 2 && replica == c_[schedule::Axis::kReplica]) test_nan_step_ = at;
    }
  }
}

std::vector<float>& Trainer::outer_host() {
  host_.resize(chunks_.size());
  host_[0].params.resize(gpt_->num_params());
  return host_[0].params;
}

void Trainer::reset_outer() {
  if (!outer_) return;
  optimizer_->params_ready();
  if (gpt_->backend().memory->is_host()) {
    outer_->reset(gpt_->params());
  } else {
    std::vector<float>& host = outer_host();
    gpt_->read_params(host);
    outer_->reset(host.data());
  }
}

// Test hook (docs/launch.md): HOLMES_TEST_KILL_IN_OUTER_SYNC="STEP:REPLICA[:WHERE]" kills the
// ranks of that replica (numbered as at the start) where the sync across replicas of STEP
// begins: diloco's outer sync after step STEP; WHERE "verdict": after its collectives, before
// the replica counts itself in to the elastic verdict. Elastic sync (HSDP): as step STEP's
// all-reduce across replicas begins; WHERE "one": only the replica's first rank dies, after
// the reduce-scatter inside the replica, so its peers pass their own groups across and go on.
// WHERE "agree" (diloco): only the replica's first rank, before the sum across replicas that
// precedes the outer sync after step STEP.
void Trainer::kill_in_outer_sync(int64_t done, const char* where) const {
  const char* hook = std::getenv("HOLMES_TEST_KILL_IN_OUTER_SYNC");
  if (hook == nullptr) return;
  long long at = -1, replica = -1;
  char given[16] = {};
  const int n = std::sscanf(hook, "%lld:%lld:%15s", &at, &replica, given);
  if (n < 2 || at != done || replica != replica_id_) return;
  if (outer_ && outer_->due(done).empty()) return;
  const std::string g = n == 3 ? given : "";
  const bool one = g == "one" || g == "agree";
  if ((g == "one" ? std::string() : g) != where) return;
  if (one && (c_[schedule::Axis::kDp] != 0 || c_[schedule::Axis::kTp] != 0 || c_[schedule::Axis::kPp] != 0))
    return;
  std::fflush(stdout);
  std::raise(SIGKILL);
}

void Trainer::outer_step(int64_t done) {
  if (!outer_->busy(done)) return;
  optimizer_->params_ready();
  kill_in_outer_sync(done, "");
  const bool host = gpt_->backend().memory->is_host();
  float* params = host ? gpt_->params() : nullptr;
  if (!host) {
    std::vector<float>& copy = outer_host();
    gpt_->read_params(copy);
    params = copy.data();
  }
  if (recovery_) elastic_outer_step(done, params);
  else outer_->after_step(done, params);
  if (host) gpt_->params_updated();
  else gpt_->load_params(outer_host());
}

namespace {

// runtime::check_precision_device refused the CPU and older GPUs before any work; this is the
// backend's own word (a test vehicle may emulate FP8 on the host).
void require_fp8_kernels(const model::Backend& backend) {
  const model::Fp8Recipe r;
  for (DType t : {r.forward, r.backward})
    if (!backend.kernels->supports(t))
      throw UserError(fmt::format("train.precision: 'fp8' needs FP8 GEMM kernels ({}), and the {} backend ({} "
                                  "kernels) has none (accepted here: auto, bf16, fp32)",
                                  dtype_name(t), backend.device, backend.kernels->name()));
}

}  // namespace

DType precision_of(spec::Precision precision, const model::Backend& backend) {
  // The rule is the spec's (spec::trains_bf16, which the planner prices): a backend with bf16
  // kernels is a GPU.
  // fp8 (bf16 activations under FP8 GEMMs) is refused first by what it needs most, naming fp8.
  if (precision == spec::Precision::kFp8) require_fp8_kernels(backend);
  const bool has_bf16 = backend.kernels->supports(DType::kBf16);
  if (!spec::trains_bf16(precision, has_bf16)) return DType::kF32;
  if (!has_bf16)
    throw UserError(fmt::format("train.precision: 'bf16' needs bf16 kernels, and the {} backend ({} kernels) computes "
                                "in fp32 (accepted here: auto, fp32; bf16 trains with job.device: cuda)",
                                backend.device, backend.kernels->name()));
  return DType::kBf16;
}

std::optional<model::Fp8Recipe> fp8_recipe_of(const schedule::RankPlan& plan, const model::Backend& backend) {
  if (plan.precision != spec::Precision::kFp8) return std::nullopt;
  require_fp8_kernels(backend);
  model::Fp8Recipe r;
  r.lm_head = plan.fp8_lm_head;
  return r;
}

model::ActivationPolicy activation_policy(const schedule::RankPlan& plan) {
  model::ActivationPolicy p;
  p.split_backward = plan.split_backward();
  p.document_mask = plan.document_mask;
  p.fp8_boundary = plan.pipe_fp8;
  switch (plan.recompute) {
    case spec::Recompute::kAuto:  // the planner resolves auto: a plan never carries it
      throw std::invalid_argument("activation_policy: train.recompute auto is the planner's to resolve");
    case spec::Recompute::kNone: p.recompute = model::Recompute::kNone; break;
    case spec::Recompute::kSelective: p.recompute = model::Recompute::kSelective; break;
    case spec::Recompute::kFull: p.recompute = model::Recompute::kFull; break;
  }
  return p;
}

std::string Trainer::numerics() const {
  const std::optional<model::Fp8Recipe>& fp8 = gpt_->fp8_recipe();
  const std::string precision = fp8 ? model::describe(*fp8) : dtype_name(gpt_->precision());
  return fmt::format("{}, attention: {}, recompute: {}, schedule: {}{}", precision,
                     gpt_->attention_method(), model::recompute_name(gpt_->policy().recompute),
                     schedule::pipe_schedule_name(plan_.schedule),
                     gpt_->policy().fp8_boundary ? ", pipeline sends: fp8 (e4m3 activations, e5m2 gradients)" : "");
}

std::string Trainer::precision_record() const {
  const std::optional<model::Fp8Recipe>& fp8 = gpt_->fp8_recipe();
  return fp8 ? fmt::format("fp8 {}", model::recipe_text(*fp8)) : std::string(dtype_name(gpt_->precision()));
}

double Trainer::flops_per_token() const {
  const model::GptConfig full = gpt_config_of(spec_);
  const int b = plan_.micro_batch, t = plan_.seq_len;
  return model::shard_train_flops(full, b, t) / (static_cast<double>(b) * t);
}

void Trainer::agree(StepStats& s) {
  if (s.agreed) return;
  if (s.step != local_.step)
    throw std::logic_error(fmt::format("Trainer::agree: stats of step {}, the replica's figures at hand are of step {}",
                                       s.step, local_.step));
  across_replicas(s.step, [&] { agree_replicas(s); });
}

void Trainer::agree_replicas(StepStats& s) {
  // [loss sum, stop flags, one slot per replica: its first step with a non-finite loss + 1 (0:
  // none)]; each replica fills its own slot, so the sum gathers every replica's.
  const int n = c_.degree(schedule::Axis::kReplica);
  std::vector<double> v(2 + static_cast<size_t>(n), 0.0);
  v[0] = local_.loss_sum;
  v[1] = local_.stops;
  if (first_bad_ >= 0) v[2 + static_cast<size_t>(c_[schedule::Axis::kReplica])] = static_cast<double>(first_bad_ + 1);
  groups_->sum_over_replicas(v);
  ++agreements_;
  std::string bad;
  int64_t first = -1;
  for (int r = 0; r < n; ++r) {
    const int64_t at = std::llround(v[2 + static_cast<size_t>(r)]) - 1;
    if (at < 0) continue;
    bad += fmt::format("{}replica {} at step {}", bad.empty() ? "" : ", ", replicas_.at(static_cast<size_t>(r)), at + 1);
    first = first < 0 ? at : std::min(first, at);
  }
  if (first >= 0)
    throw std::runtime_error(fmt::format("training loss is not finite on {}: the run diverged (try a lower train.lr or "
                                         "train.grad_clip); every replica stops after step {}, before those weights "
                                         "reach an outer sync", bad, s.step + 1));
  agreed_ = {s.step, v[0], v[1]};
  fill_agreed(s);
}

void Trainer::fill_agreed(StepStats& s) const {
  s.loss = agreed_.loss_sum / c_.data_size();
  s.stop_ranks = static_cast<int>(std::lround(agreed_.stops));
  s.agreed = true;
  s.replica = -1;
  if (recovery_) s.replicas = replicas_;
  if (!std::isfinite(s.loss))
    throw std::runtime_error(fmt::format("training loss is {} at step {}: the run diverged (try a lower train.lr "
                                         "or train.grad_clip)", s.loss, s.step + 1));
}

StepStats Trainer::train_step(int64_t step, bool stop_requested, Agreement agreement) {
  // Replicas admitted at the last exchange (or update, elastic sync): every replica holds the
  // state and has done the loop's work of that step over the groups without them; they take
  // the state of the first coordinate that trained on.
  if (join_after_ >= 0) take_joiners(std::exchange(join_after_, -1));
  // Elastic sync: a failure across the replicas before the update regrouped the survivors, who
  // redo the step over the new layout (try_step).
  for (;;)
    if (std::optional<StepStats> s = try_step(step, stop_requested, agreement)) return *s;
}

std::optional<StepStats> Trainer::try_step(int64_t step, bool stop_requested, Agreement agreement) {
  const auto t0 = std::chrono::steady_clock::now();
  // The step's CPU seconds for the calibration (cpu_s): the training thread's (its passes, its
  // host work and the tensor-parallel sums it calls), not the communication thread's
  // data-parallel and pipeline traffic nor Gloo's I/O threads, which cost another plan other CPU (a plan with its
  // all-reduce over Ethernet spends more CPU per FLOP than one without, and the figure is
  // carried between plans). BLAS threads beyond the first are not counted either: with several
  // compute threads the figure reads high and the quota bound it feeds binds less, never more.
  const double cpu0 = thread_cpu_s();
  const double process_cpu0 = process_cpu_ms();  // every thread: what a CPU quota caps
  const auto& t = spec_.train;
  last_step_ = step;
  groups_->clock().reset();
  if (steps_ == kWarmupSteps) groups_->group(schedule::Axis::kTp).reset_sums();  // a calibration times the steady steps' sums
  for (auto& g : chunks_) g->zero_grad();
  auto fetch = [&](int micro, int32_t* inputs, int32_t* targets, int32_t* positions) {
    data::BatchCoord c{.step = step, .micro = micro, .dp_rank = c_.data_rank(), .dp_size = c_.data_size(),
                       .micro_batch = plan_.micro_batch, .global_batch = plan_.global_batch, .origin = origin_};
    data_.train().fill_batch(c, inputs, targets, positions);
  };
  const double factor = loss_factor(data_.train(), data_position(step), plan_.global_batch);
  // The schedule's place, by the layout this step reads with (a regroup later in the step moves
  // the origin to the next step).
  const int64_t tokens_seen = data_position(step) * plan_.seq_len, step_tokens = tokens_per_step();
  stage_->set_loss_scale(static_cast<float>(factor));
  std::vector<int> passes(chunks_.size(), 0);
  using Clock = std::chrono::steady_clock;
  const auto ms_since = [](Clock::time_point a) { return std::chrono::duration<double, std::milli>(Clock::now() - a).count(); };
  const double loss_sum = stage_->run_step(fetch, [&](int chunk, int) {
    // A chunk's last backward (its W pass under zb-h1) finishes its gradients: overlap its DP
    // reduction with it.
    if (++passes.at(chunk) == plan_.micro_batches) optimizers_[chunk]->arm();
  });
  const double pipeline_ms = ms_since(t0);
  const auto t_grads = Clock::now();
  for (auto& o : optimizers_) o->finish_grads();
  // Elastic sync (HSDP): the owned shards' mean over the replicas, before the norm reads them.
  // A failure here is taken up at the verdict below, after the sums inside the replica.
  if (hsdp_) {
    kill_in_outer_sync(step + 1, "");
    hsdp_across(step, [&] {
      for (auto& o : optimizers_) o->average_over_replicas(groups_->group(schedule::Axis::kReplica));
    });
  }
  const double grad_sync_ms = ms_since(t_grads);
  const auto t_sums = Clock::now();
  // [grad sq by norm unit..., loss, stop flags]: the loss comes from one rank per pipeline
  // (last stage, tp rank 0); every rank counts its own stop request. Each unit's sum lives on
  // one stage, so the pipeline sum adds zeros to it, exactly; the units are then added in unit
  // order: the same norm under every plan (dist_optimizer.hpp).
  const int units = norm_units(spec_.model.layers);
  std::vector<double> sums(units + 2, 0.0);
  for (auto& o : optimizers_) o->add_owned_grad_sq(sums);  // units are layers: chunks add to theirs
  sums[units] = counts_loss() ? loss_sum * factor / plan_.micro_batches : 0.0;
  sums[units + 1] = stop_requested ? 1.0 : 0.0;
  groups_->sum_over_job(sums);
  if (step + 1 == test_nan_step_) sums[units] = std::nan("");
  // The replicas' norms stay their own (each clips its own step); the loss and the stop flags
  // are the job's, so that every replica stops at the same step: summed over the outer group
  // every step (kNow) or only before an outer exchange starts and where agree() asks
  // (kAtSyncs: the replicas meet there anyway; Agreement in step_runner.hpp).
  // Elastic sync replicas meet every step anyway: kNow.
  std::string presync_failed;  // elastic diloco: the sum before the exchange failed here (taken up below)
  const bool at_syncs = c_.degree(schedule::Axis::kReplica) > 1 && agreement == Agreement::kAtSyncs && !hsdp_;
  if (c_.degree(schedule::Axis::kReplica) > 1 && !at_syncs) {
    std::span<double> job(sums.data() + units, 2);
    const std::vector<double> mine(job.begin(), job.end());
    const auto sum = [&] {
      std::copy(mine.begin(), mine.end(), job.begin());
      groups_->sum_over_replicas(job);
    };
    if (!hsdp_) across_replicas(step, sum);
    else hsdp_across(step, sum);
  }
  // Elastic sync: the update only once every member got this far (the store's single verdict),
  // so the survivors of a loss all hold step - 1's state or all step's. A rank that met the
  // failure itself does not count in: its refusal made the verdict 0.
  if (hsdp_failed_) {
    const std::string what = std::move(*hsdp_failed_);
    hsdp_failed_.reset();  // the step is tried again over the survivors
    redo_step(step, what);
    return std::nullopt;
  }
  if (hsdp_ && recovery_ && !recovery_->exchange_complete(step)) {
    redo_step(step, fmt::format("another replica failed before the update of step {}", step + 1));
    return std::nullopt;
  }
  if (hsdp_ && recovery_ && recovery_->admitted(step)) join_after_ = step;
  double grad_sq = 0;
  for (int u = 0; u < units; ++u) grad_sq += sums[u];
  StepStats s;
  s.step = step;
  s.pipeline_ms = pipeline_ms;
  s.passes_ms = stage_->pass_s() * 1e3;
  s.compute_ms = stage_->compute_s() * 1e3;
  s.pipeline_wait_ms = stage_->receive_wait_s() * 1e3;
  s.grad_sync_ms = grad_sync_ms;
  s.job_sum_ms = ms_since(t_sums);
  if (at_syncs) {
    local_ = {step, sums[units], std::max(local_.stops, sums[units + 1])};  // stop flags stay set
    s.agreed = false;
    s.replica = replica_id_;
    s.loss = local_.loss_sum / c_.degree(schedule::Axis::kDp);
    s.stop_ranks = static_cast<int>(std::lround(local_.stops));
    if (!std::isfinite(s.loss) && first_bad_ < 0) first_bad_ = step;
    // Before the exchange that starts after this step reads the weights (outer_step below).
    if (!outer_->due(step + 1).empty()) {
      const auto a0 = std::chrono::steady_clock::now();
      if (recovery_) {
        // Elastic: a failure here is taken up after the update, as the exchange begins. The
        // sum is over this coordinate's outer group: another rank of this replica may have
        // passed its own and waits for this one in the update's collectives inside the replica.
        kill_in_outer_sync(step + 1, "agree");
        try {
          agree_replicas(s);
        } catch (const comm::CommError& e) {
          presync_failed = e.what();
          recovery_->met_failure(step, presync_failed, "taken up as the exchange begins, after the update");
        }
      } else {
        across_replicas(step, [&] { agree_replicas(s); });
      }
      presync_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - a0).count();
      ++presync_.count;
    }
  } else {
    agreed_ = {step, sums[units], sums[units + 1]};
    fill_agreed(s);
  }
  s.grad_norm = std::sqrt(grad_sq);
  s.lr = lr_at(lr_, tokens_seen, step_tokens);
  AdamWHyper h = hyper_;
  h.lr = static_cast<float>(s.lr);
  const auto t_update = Clock::now();
  // Refreshes the bf16 weights itself; on host groups its all-gathers land during the next forward.
  for (auto& o : optimizers_) o->update(h, step + 1, clip_scale(s.grad_norm, t.grad_clip));
  s.update_ms = ms_since(t_update);
  if (outer_) {
    // The survivors meet this rank's failure in the exchange (or its verdict) of this step; the
    // agreement is not repeated (this row keeps its replica's own loss, as between syncs).
    if (!presync_failed.empty()) regroup(recovery_->recover(step, /*exchange=*/true, presync_failed), step);
    outer_step(step + 1);
    s.outer = outer_->take_times();
  }
  // A failure another rank announced: taken up here, at the end of the step, by every rank
  // that did not meet it in a collective; a diloco replica only says it is coming and meets it
  // at its next meeting across replicas, so that every survivor registers the same step.
  if (recovery_ && recovery_->announced()) {
    if (outer_) recovery_->coming(step);
    else regroup(recovery_->recover(step, /*exchange=*/false, "another rank announced a lost replica"), step);
  }
  if (recovery_) s.replicas = replicas_;
  s.step_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  s.tokens_per_s = static_cast<double>(tokens_per_step()) / (s.step_ms / 1e3);
  s.flops = 0;
  for (const auto& g : chunks_) s.flops += g->flops_per_step(plan_.micro_batch, plan_.seq_len) * plan_.micro_batches;
  groups_->clock().settle();  // the device's communication spans of this step (NCCL groups)
  s.comm_ms = groups_->clock().ms();
  const double compute_s = stage_->compute_s();
  const double host_s = std::max(0.0, s.step_ms / 1e3 - compute_s - s.comm_ms / 1e3);
  const double cpu_s = thread_cpu_s() - cpu0;
  s.cpu_ms = process_cpu_ms() - process_cpu0;
  for (StepTimes* st : {&all_, steps_ >= kWarmupSteps ? &steady_ : nullptr})
    if (st)
      st->compute_s += compute_s, st->host_s += host_s, st->cpu_s += cpu_s, st->job_sum_s += s.job_sum_ms / 1e3,
          st->update_s += s.update_ms / 1e3;
  if (steps_ >= kWarmupSteps) {
    if (compute_per_step_.size() == kKeptSteps) compute_per_step_.erase(compute_per_step_.begin());
    compute_per_step_.push_back(static_cast<float>(compute_s));
    if (other_cpu_per_step_.size() == kKeptSteps) other_cpu_per_step_.erase(other_cpu_per_step_.begin());
    other_cpu_per_step_.push_back(static_cast<float>(std::max(0.0, s.cpu_ms / 1e3 - cpu_s)));
  }
  ++steps_;
  return s;
}

Trainer::StepTimes Trainer::step_times() const {
  const bool steady = steps_ > kWarmupSteps;
  const StepTimes& sum = steady ? steady_ : all_;
  const int n = timed_steps();
  return n > 0 ? StepTimes{sum.compute_s / n, sum.host_s / n, sum.cpu_s / n, sum.job_sum_s / n, sum.update_s / n}
               : StepTimes{};
}

double Trainer::loss_factor(const data::SequenceStream& s, int64_t first, int64_t count) const {
  if (!s.options().mask_document_start) return 1.0;
  const int64_t counted = s.counted_targets(first, count);
  return counted > 0 ? static_cast<double>(count) * s.seq_len() / static_cast<double>(counted) : 0.0;
}

double Trainer::evaluate() {
  source_losses_.clear();
  const auto& sources = data_.valid_sources();
  if (sources.empty()) return std::nan("");
  const auto& t = spec_.train;
  const int count = std::max(1, t.eval_steps) * plan_.micro_batches;
  double weighted = 0, weights = 0, only = 0;
  for (const auto& source : sources) {
    const data::SequenceStream one({source});
    auto fetch = [&](int e, int32_t* inputs, int32_t* targets, int32_t* positions) {
      // eval_steps global batches of the unshuffled sampler, this rank's micro-batches of each:
      // the same sequences every time and under every plan (as Trainer::evaluate).
      one.fill_batch(validation_coord(plan_, e), inputs, targets,
                     positions);
    };
    stage_->set_loss_scale(1.0f);
    const double sum = stage_->run_forward(count, fetch);
    double mean[1] = {counts_loss() ? sum / count : 0.0};
    groups_->sum_over_job(mean);
    const double mine = mean[0];
    across_replicas(last_step_, [&] {
      mean[0] = mine;
      groups_->sum_over_replicas(mean);
    });
    const int64_t sequences = static_cast<int64_t>(std::max(1, t.eval_steps)) * plan_.global_batch;
    only = mean[0] / c_.data_size() * loss_factor(one, 0, sequences);
    source_losses_.emplace_back(source.name, only);
    weighted += source.weight * only;
    weights += source.weight;
  }
  if (sources.size() == 1) {
    source_losses_.clear();
    return only;
  }
  return weighted / weights;
}

checkpoint::ShardState Trainer::shard_state() {
  if (chunks_.size() > 1)  // checkpoints and loads take shard_states()
    throw std::logic_error("Trainer::shard_state: the rank holds model chunks (interleaved): use shard_states()");
  return chunk_state(0);
}

std::vector<checkpoint::ShardState> Trainer::shard_states() {
  std::vector<checkpoint::ShardState> out;
  for (size_t c = 0; c < chunks_.size(); ++c) out.push_back(chunk_state(c));
  return out;
}

std::vector<checkpoint::ShardState> Trainer::shard_shapes() {
  std::vector<checkpoint::ShardState> out;
  for (size_t c = 0; c < chunks_.size(); ++c) out.push_back(chunk_shape(c));
  return out;
}

checkpoint::ShardState Trainer::chunk_shape(size_t c) const {
  checkpoint::ShardState st;
  st.layout = &chunks_[c]->layout();
  st.config = &chunks_[c]->config();
  st.owned = optimizers_[c]->owned();
  // diloco: the shared checkpoint holds replica 0's shard; the others keep theirs in their
  // private state (private_state()), so no tensor is saved twice. Elastic sync: every replica
  // holds replica 0's state; the others load their owned moments and write none.
  if (c_[schedule::Axis::kReplica] > 0 && hsdp_) st.writes = false;
  else if (c_[schedule::Axis::kReplica] > 0) st.owned.clear();
  return st;
}

checkpoint::ShardState Trainer::chunk_state(size_t c) {
  model::Gpt& gpt = *chunks_[c];
  DistOptimizer& opt = *optimizers_[c];
  opt.params_ready();
  checkpoint::ShardState st = chunk_shape(c);
  device::DeviceMemory& mem = *gpt.backend().memory;
  if (mem.is_host()) {
    st.params = gpt.params();
    st.exp_avg = opt.exp_avg();
    st.exp_avg_sq = opt.exp_avg_sq();
    return st;
  }
  host_.resize(chunks_.size());
  HostCopy& h = host_[c];
  const size_t moments = opt.moment_floats();
  h.params.resize(gpt.num_params());
  h.m.resize(moments);
  h.v.resize(moments);
  gpt.read_params(h.params);
  mem.download(h.m.data(), opt.exp_avg(), moments * sizeof(float));
  mem.download(h.v.data(), opt.exp_avg_sq(), moments * sizeof(float));
  st.params = h.params.data();
  st.exp_avg = h.m.data();
  st.exp_avg_sq = h.v.data();
  return st;
}

void Trainer::upload_shard_state() {
  for (size_t c = 0; c < chunks_.size(); ++c) {
    model::Gpt& gpt = *chunks_[c];
    DistOptimizer& opt = *optimizers_[c];
    opt.params_ready();  // (shard_states() waited already: a no-op then)
    device::DeviceMemory& mem = *gpt.backend().memory;
    if (mem.is_host()) {
      gpt.params_updated();  // the loader wrote the master weights in place: refresh a bf16 copy
      continue;
    }
    if (c >= host_.size() || host_[c].params.empty())
      throw std::logic_error("Trainer::upload_shard_state: no shard_states() view of every chunk to upload");
    const HostCopy& h = host_[c];
    gpt.load_params(h.params);
    mem.upload(opt.exp_avg(), h.m.data(), h.m.size() * sizeof(float));
    mem.upload(opt.exp_avg_sq(), h.v.data(), h.v.size() * sizeof(float));
  }
}

}  // namespace holmes::parallel

namespace holmes::parallel {

namespace {

// private_state(): a header of five uint64 (magic, replica, params, moments, outer floats)
// then params, exp_avg, exp_avg_sq and OuterSync::state() (anchor, momentum, residual, owner
// residual) as floats; elastic sync replicas have no outer state (0 outer floats).
constexpr uint64_t kPrivateMagic = 0x32534f4c45444f48ULL;  // "HOLMESO2"

}  // namespace

std::vector<std::byte> Trainer::private_state() {
  if (!outer_ && !hsdp_) return {};
  optimizer_->params_ready();
  if (outer_) outer_->land();  // an exchange in flight: its decoded average goes into the checkpoint
  const size_t n = gpt_->num_params(), m = optimizer_->moment_floats(), k = outer_ ? outer_->state_floats() : 0;
  std::vector<float> params(n), ma(m), mb(m);
  gpt_->read_params(params);
  device::DeviceMemory& mem = *gpt_->backend().memory;
  mem.download(ma.data(), optimizer_->exp_avg(), m * sizeof(float));
  mem.download(mb.data(), optimizer_->exp_avg_sq(), m * sizeof(float));
  const uint64_t head[5] = {kPrivateMagic, static_cast<uint64_t>(c_[schedule::Axis::kReplica]), n, m, k};
  std::vector<std::byte> out(sizeof(head) + 4 * (n + 2 * m + k));
  std::byte* w = out.data();
  auto put = [&](const void* p, size_t bytes) { std::memcpy(w, p, bytes), w += bytes; };
  put(head, sizeof(head));
  put(params.data(), 4 * n);
  put(ma.data(), 4 * m);
  put(mb.data(), 4 * m);
  if (outer_) put(outer_->state().data(), 4 * k);
  return out;
}

void Trainer::load_private_state(std::span<const std::byte> bytes) {
  if (!outer_ && !hsdp_) return;
  const size_t n = gpt_->num_params(), m = optimizer_->moment_floats(), k = outer_ ? outer_->state_floats() : 0;
  uint64_t head[5] = {};
  if (bytes.size() >= sizeof(head)) std::memcpy(head, bytes.data(), sizeof(head));
  if (head[0] != kPrivateMagic || head[1] != static_cast<uint64_t>(c_[schedule::Axis::kReplica]) || head[2] != n || head[3] != m ||
      head[4] != k || bytes.size() != sizeof(head) + 4 * (n + 2 * m + k))
    throw std::runtime_error(fmt::format("private checkpoint state: {} bytes for replica {} of {} params, {} moments, "
                                         "{} outer floats; this rank (replica {}) keeps {}, {}, {}", bytes.size(),
                                         head[1], head[2], head[3], head[4], c_[schedule::Axis::kReplica], n, m, k));
  const float* r = reinterpret_cast<const float*>(bytes.data() + sizeof(head));
  optimizer_->params_ready();
  gpt_->load_params(std::span<const float>(r, n));
  device::DeviceMemory& mem = *gpt_->backend().memory;
  mem.upload(optimizer_->exp_avg(), r + n, m * sizeof(float));
  mem.upload(optimizer_->exp_avg_sq(), r + n + m, m * sizeof(float));
  if (outer_) outer_->load(std::span<const float>(r + n + 2 * m, k));
}

}  // namespace holmes::parallel
