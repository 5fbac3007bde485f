// What the training loop (run.cpp) drives on every rank: a StepRunner. The Trainer
// (trainer.hpp) implements it for every kind of run; the loop sees only this interface, so
// logging, validation, checkpoints and preemption are written once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "engine/checkpoint/shard_state.hpp"
#include "engine/parallel/outer_times.hpp"
#include "model/gpt_config.hpp"

namespace holmes::parallel {

struct StepStats {
  int64_t step = 0;         // 0-based step just taken
  double loss = 0;          // mean training loss over the step's micro-batches (and ranks)
  double lr = 0;
  double grad_norm = 0;     // global norm before clipping
  double step_ms = 0;
  double tokens_per_s = 0;  // whole job: global_batch * seq_len / step time
  double flops = 0;         // model FLOPs of this rank's step
  double comm_ms = 0;       // part of step_ms this rank spent waiting on communication (<= step_ms)
  double cpu_ms = 0;        // CPU time of this rank's whole process (every thread) over the step
  // Wall time between the end of this rank's previous step and the start of this one: the
  // loop's own work (the previous rows, the job-wide log figures' exchange on log steps,
  // checkpoints, validation), outside step_ms. Set by the training loop; 0 for its first step.
  double between_ms = 0;
  // Where step_ms went on this rank, in the order the step runs them (as Megatron-LM's timers):
  // the pipeline's passes with their sends and waits (on host groups also the previous step's
  // parameter all-gathers that land in them), the wait for the gradient reductions still
  // running after the last backward, the job-wide sum of the gradient norm, loss and stop
  // flags, and the optimizer step (clipping, update, launching the next all-gathers). They add
  // up to step_ms but for the outer sync (diloco) and a few microseconds of bookkeeping.
  double pipeline_ms = 0, grad_sync_ms = 0, job_sum_ms = 0, update_ms = 0;
  // Inside pipeline_ms: the passes (their compute and what they waited for inside: tensor-parallel
  // sums, all-gathers landing in a forward) and the waits for a neighbouring stage's activation
  // or gradient that had not arrived when a pass needed it (0 without pipeline parallelism).
  // The rest of pipeline_ms is the stage's own copies, posts and sends' buffer waits.
  double passes_ms = 0, pipeline_wait_ms = 0;
  // Inside passes_ms: the passes' own compute, without what they waited for inside (tensor-
  // parallel sums, all-gathers): the work only this rank does, what peers doing the same work
  // are compared by (the log's stragglers, engine/train/stragglers.hpp).
  double compute_ms = 0;
  int stop_ranks = 0;  // ranks whose stop_requested was true: summed with the step's loss and norm
  // Whether loss and stop_ranks are the job's. A step trained with Agreement::kAtSyncs between
  // two outer syncs returns false: then loss and stop_ranks are those of this rank's replica
  // (`replica`) alone, until StepRunner::agree makes them the job's.
  bool agreed = true;
  int replica = -1;  // agreed false: the replica whose loss `loss` is (this rank's)
  // diloco: where this rank's outer sync after the step spent its time (empty: none).
  OuterTimes outer;
};

// When a step's job-wide loss and stop flags are known. With diloco replicas (parallel.outer:
// diloco) their sum across the replicas crosses the slow link, and each such sum makes every
// replica wait for the slowest:
//   kNow      every step: train_step sums them across the replicas and returns the job's.
//   kAtSyncs  only where the replicas meet anyway: train_step sums them across the replicas
//             (blocking, before the optimizer update) on the steps after which an outer
//             exchange starts (OuterSync::due), and returns the job's stats there; on the
//             steps between, the stats of the rank's replica (its loss over its own ranks,
//             its ranks' stop requests) with agreed false, which agree() turns into the job's
//             with a sum of its own (what the run does where it needs them: its last step, a
//             validation, a checkpoint). So a stop request reaches every rank at the same
//             step, at the next outer sync at the latest (inner_steps / fragments steps), and
//             a non-finite loss of any replica since the previous sum stops every rank there,
//             before its weights leave it in an outer exchange.
// Without replicas both agree every step.
enum class Agreement { kNow, kAtSyncs };


class StepRunner {
 public:
  virtual ~StepRunner() = default;
  // One optimizer step (0-based `step`); every rank returns the same loss, lr, grad_norm and
  // stop_ranks. stop_requested (this rank received a stop signal) travels in the step's own
  // job-wide sum, so stopping costs no collective of its own and every rank learns it at the
  // same step. Throws std::runtime_error when the (agreed) loss is not finite. With kAtSyncs
  // the stats may come back with agreed false (see Agreement).
  virtual StepStats train_step(int64_t step, bool stop_requested = false, Agreement agreement = Agreement::kNow) = 0;
  // Makes `s`, the stats of the last step that train_step returned with agreed false, the
  // job's: sums its replica's loss and stop flags across the replicas now (a collective: every
  // rank calls it at the same step). Throws std::runtime_error naming the replica and step when
  // a replica's loss was not finite, std::logic_error for stats of another step.
  virtual void agree(StepStats& s) {
    if (!s.agreed) throw std::logic_error("StepRunner::agree: this runner does not agree later");
  }
  // How many sums across the replicas agree() and train_step made so far (0 without replicas).
  virtual int replica_agreements() const { return 0; }
  // Mean validation loss over train.eval_steps global batches (the same sequences under every
  // parallel plan), identical on every rank; NaN when there is no validation data. With
  // several validation sources (data.valid's, or a mixture's held-out tails): the mean of
  // their losses weighted by their weights, each source's in source_losses().
  virtual double evaluate() = 0;
  // (name, loss) of each validation source at the last evaluate(); empty with one source.
  virtual std::vector<std::pair<std::string, double>> source_losses() const { return {}; }
  // The loader's position (engine/data/batches.hpp: StreamOrigin): step `step` reads the data
  // stream from sequence `sequence` on, and each step after it global_batch sequences more.
  // A fresh run starts at (0, 0); a resume at its checkpoint's (step, recorded position).
  virtual void set_data_origin(int64_t step, int64_t sequence) {}
  // The stream position after `done` steps (what a checkpoint records); -1 = not known.
  virtual int64_t data_position(int64_t done) const { return -1; }
  // The shard as host memory, for checkpoints and final weights: the live buffers on the CPU
  // backend; on a device, host copies made by this call. A caller that writes into it (a
  // checkpoint load) calls upload_shard_state() afterwards. One model chunk only (a runner
  // with several throws std::logic_error): checkpoints and loads use shard_states().
  virtual checkpoint::ShardState shard_state() = 0;
  // One state per model chunk of the rank, in chunk order (interleaved: V of them; otherwise
  // the one of shard_state()), as shard_state() makes it. A checkpoint writes them all into the
  // rank's one file and a load fills each by tensor name.
  virtual std::vector<checkpoint::ShardState> shard_states() { return {shard_state()}; }
  // The same views without their buffers (params and moments null): layout, config and owned
  // ranges only, what a checkpoint's size depends on; no copy from a device.
  virtual std::vector<checkpoint::ShardState> shard_shapes() { return shard_states(); }
  // Puts what was written into the last shard_state() / shard_states() views back into the
  // backend's buffers, every chunk's (on the CPU backend only the bf16 weight copy, if any, is
  // refreshed).
  virtual void upload_shard_state() = 0;
  // State of this rank alone that the shard does not hold (diloco: its replica's weights and
  // AdamW moments, the outer anchor and momentum). A checkpoint writes it beside the shard
  // (private-NNNNN.bin) and a resume under the same plan gives it back after the shard;
  // otherwise reset_private_state() restarts it from the loaded weights.
  virtual bool has_private_state() const { return false; }
  virtual std::vector<std::byte> private_state() { return {}; }
  virtual void load_private_state(std::span<const std::byte>) {}
  virtual void reset_private_state() {}

  // For the log header.
  virtual const char* backend_name() const = 0;  // "cpu" or "cuda"
  virtual const char* kernels_name() const = 0;
  // The storage precision and the attention method, for the start-up line ("bf16, attention
  // cudnn ...").
  virtual std::string numerics() const = 0;
  // The precision for checkpoints (checkpoint::SaveContext::precision): "fp32", "bf16" or
  // "fp8 <recipe_text>" (model/fp8_recipe.hpp).
  virtual std::string precision_record() const { return ""; }
  // MiB of device memory in use on this rank's GPU (0 on the CPU), for the log.
  virtual double device_mb() const { return 0; }
  virtual const model::GptConfig& shard_config() const = 0;
  virtual int micro_batches() const = 0;     // per step per data-parallel rank
  virtual int64_t tokens_per_step() const = 0;  // whole job
  virtual double flops_per_token() const = 0;   // whole model, 6N + 12 L T C
};

}  // namespace holmes::parallel
