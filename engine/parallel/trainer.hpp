// The trainer: one rank of a tensor x pipeline x data parallel job (Megatron-LM semantics),
// run as its RankPlan (engine/schedule/rank_plan.hpp) says, and with a plan of one rank and no
// groups the single process:
//   TP  the model shard's all-reduces go over the tp group (GroupTensorParallel);
//   PP  the plan's step table (1F1B, ZB-H1 with the model's backward split into B and W, or
//       interleaved 1F1B over the plan's model chunks: one Gpt and one DistOptimizer per
//       chunk, virtual stage chunk x pp + stage; PipelineStage, pipeline_stage.hpp), one
//       activation slot per micro-batch in flight on the stage, each keeping what the plan's
//       recompute mode leaves (model/gpt.hpp: Recompute);
//   DP  the distributed optimizer (dist_optimizer.hpp): bucketed reduce-scatter overlapped
//       with the last micro-batch's backward, sharded AdamW, all-gather of parameters;
//   the tied wte gradient summed over the embedding group beside the compute, posted when
//   each end's share is final and landed where it is read, before its DP reduction;
//   one global gradient norm (owned squares summed over dp, tp, pp) and one loss (last
//   stage's mean, averaged over dp), identical on every rank.
// Every run (single process, each rank of a job, bench) trains through this one class. What
// it reads of the spec is the model, the seed, the optimizer's settings and validation's
// length; every parallel and batch decision is the plan's.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "engine/spec/job_spec.hpp"
#include "engine/parallel/adamw.hpp"
#include "engine/data/data.hpp"
#include "engine/parallel/dist_optimizer.hpp"
#include "engine/parallel/groups.hpp"
#include "engine/parallel/outer_sync.hpp"
#include "engine/parallel/pipeline_stage.hpp"
#include "engine/parallel/replica_recovery.hpp"
#include "engine/parallel/step_runner.hpp"
#include "engine/schedule/rank_plan.hpp"
#include "model/backend.hpp"
#include "model/gpt.hpp"

namespace holmes::parallel {

// GptConfig of spec.model (tp = 1, one stage; vocabulary padded by the model).
model::GptConfig gpt_config_of(const spec::JobSpec& spec);
// A plan's train.precision on this backend: auto is bf16 where the backend has bf16 kernels
// (a GPU), fp32 elsewhere; fp8 is bf16 activations under FP8 GEMMs. UserError (exit 2) for
// bf16 on a backend without bf16 kernels, for fp8 on one without FP8 GEMM kernels.
DType precision_of(spec::Precision precision, const model::Backend& backend);
// A plan's train.precision fp8: the FP8 recipe whose GEMMs run on the bf16 activations
// precision_of gives; nullopt for other precisions. UserError (exit 2) on a backend without
// FP8 GEMM kernels.
std::optional<model::Fp8Recipe> fp8_recipe_of(const schedule::RankPlan& plan, const model::Backend& backend);
// The learning-rate schedule and AdamW settings of spec.train.
LrConfig lr_config_of(const spec::JobSpec& spec);
AdamWHyper adamw_hyper_of(const spec::JobSpec& spec);
// Validation reads train.eval_steps global batches of the unshuffled validation sampler (as
// Megatron-LM's --eval-iters), so the validation loss is the same under every parallel plan.
// Micro-batch `index` (0 .. eval_steps * micro_batches - 1) of this rank's data rank:
data::BatchCoord validation_coord(const schedule::RankPlan& plan, int index);
// What the model keeps for backward: the plan's recompute mode, and the backward split into
// B and W where its table places W passes (zb-h1).
model::ActivationPolicy activation_policy(const schedule::RankPlan& plan);

class Trainer final : public StepRunner {
 public:
  // spec, backend, data and groups must outlive the trainer; groups null: one process alone
  // (a plan of one rank). Throws UserError for bf16 on a backend without bf16 kernels,
  // std::invalid_argument when the plan does not fit the groups or the model (a wiring error:
  // the spec's rules and the planner keep users from it). Every CommError of a group
  // propagates out of the calls below.
  Trainer(const spec::JobSpec& spec, const schedule::RankPlan& plan, model::Backend& backend,
          const data::DataSet& data, ParallelGroups* groups = nullptr);
  Trainer(const Trainer&) = delete;  // its parts hold references to the groups and the model
  Trainer& operator=(const Trainer&) = delete;

  StepStats train_step(int64_t step, bool stop_requested = false, Agreement agreement = Agreement::kNow) override;
  void agree(StepStats& s) override;
  int replica_agreements() const override { return agreements_; }
  // The sums across the replicas made before an outer exchange: how many and their wall seconds
  // in all. The replicas last met there one outer period (inner_steps / fragments steps) before,
  // so a sum waits for the replica whose steps took longest since (the calibration's
  // `outer: drift_ms`, docs/cost-model.md).
  struct PresyncSums {
    int count = 0;
    double seconds = 0;
  };
  const PresyncSums& presync_sums() const { return presync_; }
  double evaluate() override;
  std::vector<std::pair<std::string, double>> source_losses() const override { return source_losses_; }
  void set_data_origin(int64_t step, int64_t sequence) override { origin_ = {step, sequence}; }
  int64_t data_position(int64_t done) const override {
    return origin_.sequence + (done - origin_.step) * plan_.global_batch;
  }
  checkpoint::ShardState shard_state() override;  // one chunk only (else std::logic_error)
  std::vector<checkpoint::ShardState> shard_states() override;
  std::vector<checkpoint::ShardState> shard_shapes() override;
  void upload_shard_state() override;
  const model::GptConfig& shard_config() const override { return gpt_->config(); }  // chunk 0's
  int micro_batches() const override { return plan_.micro_batches; }
  int64_t tokens_per_step() const override { return plan_.global_batch * static_cast<int64_t>(plan_.seq_len); }
  const schedule::RankPlan& plan() const { return plan_; }
  double flops_per_token() const override;
  const char* backend_name() const override { return gpt_->backend().device.c_str(); }
  const char* kernels_name() const override { return gpt_->backend().kernels->name(); }
  std::string numerics() const override;
  std::string precision_record() const override;
  double device_mb() const override { return gpt_->backend().memory->device_used_mb(); }

  // Where this rank's steps went, in seconds per step, averaged over the steps after the
  // first kWarmupSteps (all steps when there were no more): computing (the model's forward
  // and backward passes), and the host work that is neither that nor waiting on
  // communication (optimizer update, gradient zeroing, norms, copies); cpu_s: the CPU time
  // the training thread spent in the step (its passes, host work and tensor-parallel sums;
  // not the communication thread's or Gloo's I/O threads', trainer.cpp thread_cpu_s).
  static constexpr int kWarmupSteps = 2;
  struct StepTimes {
    double compute_s = 0, host_s = 0, cpu_s = 0;
    double job_sum_s = 0;  // the step's job-wide sum (StepStats::job_sum_ms)
    double update_s = 0;   // the optimizer's update (StepStats::update_ms), a part of host_s
  };
  StepTimes step_times() const;
  // How many steps step_times() averages over (and the tensor-parallel group's sums() tally:
  // reset when the warm-up ends).
  int timed_steps() const { return steps_ > kWarmupSteps ? steps_ - kWarmupSteps : steps_; }
  // Compute seconds of each step after the warm-up (the last kKeptSteps of them), for a
  // calibration that takes, step by step, the slowest rank of a stage.
  static constexpr size_t kKeptSteps = 1024;
  const std::vector<float>& compute_per_step() const { return compute_per_step_; }
  // The process's CPU seconds of each of those steps beyond the training thread's (every other
  // thread: communication, Gloo's I/O, the data loader), for the calibration's in-step figure
  // of the host communication path's CPU per byte.
  const std::vector<float>& other_cpu_per_step() const { return other_cpu_per_step_; }

  // diloco: the outer sync of this rank (null without replicas).
  const OuterSync* outer() const { return outer_.get(); }
  // parallel.elastic (docs/elastic.md): the runtime's recovery, which outlives the trainer. With
  // it a CommError of a group across replicas (the sum of the loss and stop flags, the outer
  // exchange) no longer leaves train_step: the survivors regroup and the step goes on over them
  // (an exchange is redone from its start); a failure announced by another rank is taken up at
  // the end of the step. Without it (null) every CommError propagates.
  void set_recovery(ReplicaRecovery* recovery) { recovery_ = recovery; }
  // The loop's job-wide reductions failed between two steps (after the last train_step): the
  // survivors regroup as above; the caller then repeats its reduction over the new world group.
  void recover_replicas(const std::string& what);
  // The replicas that train now, numbered as at the start ([0, R) until one is lost).
  const std::vector<int>& replicas() const { return replicas_; }
  // A rank that rejoins (docs/elastic.md): built as a replica alone, it takes the layout the
  // survivors admitted it into after the exchange following step `step`, then the state of
  // the first coordinate that trained on (0, or 1 for a rejoining replica 0) over the new
  // outer group (weights, AdamW moments, outer state, data origin), as that replica's rank
  // sends it in the same exchange step. It trains on from step + 1.
  void join_replicas(const ReplicaRegroup& r, int64_t step);
  // Rank-private state a checkpoint keeps beside the shard (StepRunner::private_state).
  std::vector<std::byte> private_state() override;
  void load_private_state(std::span<const std::byte> bytes) override;
  // Elastic sync replicas hold replica 0's state: nothing private to checkpoint (private_state()
  // still gives their weights and moments, for a rejoin and the tests' dumps).
  bool has_private_state() const override { return outer_ != nullptr; }
  void reset_private_state() override { reset_outer(); }

  model::Gpt& model() { return *gpt_; }  // chunk 0 (the only one but under interleaved)
  const model::Gpt& model() const { return *gpt_; }
  int chunk_count() const { return static_cast<int>(chunks_.size()); }
  model::Gpt& chunk(int c) { return *chunks_.at(c); }
  ParallelGroups& groups() { return *groups_; }
  const DistOptimizer& optimizer() const { return *optimizer_; }
  const DistOptimizer& optimizer(int chunk) const { return *optimizers_.at(chunk); }

 private:
  bool counts_loss() const { return c_.last(schedule::Axis::kPp) && c_.first(schedule::Axis::kTp); }

  const spec::JobSpec& spec_;
  // The place and global batch change when an elastic job loses a replica (regroup).
  schedule::RankPlan plan_;
  const data::DataSet& data_;
  data::StreamOrigin origin_;  // where the data stream stood at a step (set_data_origin)
  std::vector<std::pair<std::string, double>> source_losses_;
  // data.mask_document_start: the global batch's targets over those trained on (a loss over
  // the targets that count, the same under every plan); 1 otherwise.
  double loss_factor(const data::SequenceStream& s, int64_t first, int64_t count) const;
  std::unique_ptr<ParallelGroups> own_groups_;  // one process alone
  ParallelGroups* groups_;
  const schedule::Place& c_;  // plan_.place
  // Elastic sync replicas (HSDP, docs/elastic.md): the data-parallel group inside the replica,
  // every step's owned gradients averaged over the outer group, no OuterSync.
  const bool hsdp_;
  std::unique_ptr<GroupTensorParallel> tp_comm_;
  std::vector<std::unique_ptr<model::Gpt>> chunks_;  // model chunk c of the stage (one but interleaved)
  model::Gpt* gpt_ = nullptr;                          // chunks_[0]
  std::unique_ptr<PipelineStage> stage_;
  // One per chunk, after chunks_: each unhooks itself from its model.
  std::vector<std::unique_ptr<DistOptimizer>> optimizers_;
  DistOptimizer* optimizer_ = nullptr;  // optimizers_[0]
  std::unique_ptr<OuterSync> outer_;          // diloco replicas
  ReplicaRecovery* recovery_ = nullptr;       // parallel.elastic
  int replica_id_ = 0;                        // this rank's replica, numbered as at the start
  std::vector<int> replicas_;                 // the replicas training now (start numbering)
  int64_t last_step_ = -1;                    // the step train_step last began
  int64_t join_after_ = -1;                   // replicas admitted after this step join at the next
  // The survivors' layout from step `step + 1` on: the data stream's origin there (the
  // replicas lost since the last outer sync take their sequences with them: tokens lost, never
  // read again), the place, the global batch, the outer group and the outer sync over them.
  void regroup(const ReplicaRegroup& r, int64_t step);
  // `f` (a sum across the replicas in step `step`), repeated over the survivors after a loss.
  void across_replicas(int64_t step, const std::function<void()>& f);
  void elastic_outer_step(int64_t done, float* params);  // the sync of an elastic job: redone after a loss
  // One try at step `step`; nullopt when an elastic sync job lost a replica before the update
  // (the survivors regrouped with step - 1's state: the step is redone over them).
  std::optional<StepStats> try_step(int64_t step, bool stop_requested, Agreement agreement);
  // Elastic sync: `f` (a collective across the replicas in step `step`, before its update).
  // A failure is announced at once (refuse_update) but taken up only at the step's verdict:
  // the collectives across replicas are one group per coordinate, so a replica's other ranks
  // may have passed theirs and wait for this rank in the collectives inside the replica that
  // follow. Skipped once one failed in this try of the step; a CommError without recovery.
  void hsdp_across(int64_t step, const std::function<void()>& f);
  void redo_step(int64_t step, const std::string& what);
  std::optional<std::string> hsdp_failed_;  // this try's failure across, kept to its verdict (try_step)
  // Coordinate 0 sends its state to the coordinates that joined; they receive it.
  void share_state(const std::vector<int>& joined);
  void take_joiners(int64_t step);  // the survivors' side of a join admitted after step `step`
  void dump_joined_state();  // test hook HOLMES_TEST_DUMP_WEIGHTS
  void reset_outer();                          // anchor <- the weights
  void outer_step(int64_t done);               // the fragments due after step `done`
  void kill_in_outer_sync(int64_t done, const char* where) const;  // the test hook (trainer.cpp)
  std::vector<float>& outer_host();            // a device's: host_[0].params as the outer sync's copy
  // Agreement::kAtSyncs: this replica's figures of the last step (its loss sum over its
  // data-parallel ranks, its ranks' stop requests, the most seen since the start), the first
  // step whose replica loss was not finite (-1: none; reported at the next sum across the
  // replicas), and the last sums the job agreed on (or summed at once, kNow).
  struct Local {
    int64_t step = -1;
    double loss_sum = 0, stops = 0;
  } local_;
  int64_t first_bad_ = -1;
  int64_t test_nan_step_ = -1;  // HOLMES_TEST_NAN_LOSS on this rank's replica (1-based; -1: none)
  struct Agreed {
    int64_t step = -1;
    double loss_sum = 0, stops = 0;
  } agreed_;
  int agreements_ = 0;
  PresyncSums presync_;
  void agree_replicas(StepStats& s);           // local_ summed across the replicas -> agreed_, s
  void fill_agreed(StepStats& s) const;        // s's loss and stop_ranks from agreed_ (its step)
  LrConfig lr_;
  AdamWHyper hyper_;
  // Host copies of params and moments behind shard_states() on a device backend, per chunk.
  struct HostCopy {
    std::vector<float> params, m, v;
  };
  std::vector<HostCopy> host_;
  checkpoint::ShardState chunk_state(size_t c);  // chunk c's state (a device's: into host_[c])
  checkpoint::ShardState chunk_shape(size_t c) const;  // chunk c's layout, config and owned ranges, no buffers
  StepTimes all_, steady_;  // summed over all steps / after warm-up
  int steps_ = 0;
  std::vector<float> compute_per_step_, other_cpu_per_step_;
};

}  // namespace holmes::parallel
