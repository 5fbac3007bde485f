// The training loop, written once for every kind of run: the single process and each rank
// of a distributed job go through run_loop with their Trainer. Rank 0 prints the log and
// writes metrics; checkpoints and preemption are handled here for all ranks alike.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/train/loop_context.hpp"
#include "engine/spec/job_spec.hpp"
#include "engine/data/data.hpp"
#include "engine/parallel/step_runner.hpp"
#include "engine/plan/plan.hpp"
#include "model/backend.hpp"

namespace holmes::train {

// The job's peak FLOP/s for MFU (in GFLOP/s) and where it came from: cluster.device_tflops x
// devices, else on a GPU the data sheet's dense bf16 figure of the local GPU x devices (an
// upper bound for fp32 too), else the CPU cores of every node at the peak the OS describes
// (an upper bound, so MFU stays below 100%). 0 with the reason when unknown.
std::pair<double, std::string> job_peak_gflops(const spec::JobSpec& spec, const LoopContext& ctx);

// Trains `trainer` for spec.train.steps steps. Returns the process exit code.
int run_loop(const spec::JobSpec& spec, parallel::StepRunner& trainer, const data::DataSet& data, const LoopContext& ctx);

// The backend this process trains on (model::make_backend for job.device and local_rank). When
// job.device auto falls back to the CPU it prints why, once per node (local_rank 0), after
// the data and the plan were accepted: errors about them come first.
model::Backend make_training_backend(const spec::JobSpec& spec, int local_rank = 0);

// The plan of one process on this machine, as a multi-process job plans its ranks (the
// cluster.topology overlay and the memory model checked the same way in every mode): what
// single-process training and bench run, as plan::rank_plan(plan, 0).
plan::Plan single_process_plan(const spec::JobSpec& spec);

// Single-process training of `spec` (tp = pp = dp = 1) with logging, validation,
// metrics.jsonl and the final weights in <output_dir>/final. Returns the exit code. Throws
// UserError on bad input.
int run_training(const spec::JobSpec& spec);

}  // namespace holmes::train
