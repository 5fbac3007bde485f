// What a training run prints and records: a header, one line per logged step in the style
// of Megatron-LM / torchtitan, validation lines, a progress line with the ETA, and the same
// numbers as JSON lines in <job.output_dir>/<log.metrics>.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/spec/job_spec.hpp"
#include "engine/train/metrics.hpp"
#include "engine/train/stragglers.hpp"
#include "engine/parallel/step_runner.hpp"

namespace holmes::train {

// The largest figures of any rank over the steps after those the previous figures covered, up
// to `through` (run_loop reduces them over the job on log steps only: job_figures.hpp).
struct JobMaxima {
  double rss_mb = 0;      // resident memory, MiB
  double comm_share = 0;  // share of a step spent blocked on communication, 0..1
  // Each rank's share of those steps spent blocked on communication (index = rank); empty in a single process and in jobs of more than
  // kRankFiguresMax ranks. metrics.jsonl: comm_share_ranks (the run report draws it).
  std::vector<double> comm_share_ranks;
  // Each rank's mean compute ms per step over those steps (StepStats::compute_ms; index = rank;
  // empty as comm_share_ranks is): what the log's straggler check compares (stragglers.hpp).
  // metrics.jsonl: compute_ms_ranks.
  std::vector<double> compute_ms_ranks;
  // The last step (1-based) these figures cover: the row's own step, or an earlier one when
  // they were reduced in the background (docs/training.md, "Log"). metrics.jsonl: figures_step.
  int64_t through = 0;
};
inline constexpr int kRankFiguresMax = 256;

// "" for a step with the job's loss, " (replica R)" for one whose loss is its replica's alone
// (a diloco step between outer syncs: StepStats::agreed false).
std::string loss_label(const parallel::StepStats& s);

class TrainLog {
 public:
  // peak_gflops: the device's peak for MFU; peak_source says where it came from.
  // append_metrics: a resumed run continues metrics.jsonl.
  TrainLog(const spec::JobSpec& spec, double peak_gflops, std::string peak_source,
           std::optional<double> entropy_floor, bool append_metrics = false);

  void header(const parallel::StepRunner& trainer, const std::string& data_description) const;
  // Compares the ranks' compute on every line with the job's figures from now on (a job of
  // more than one rank; `start`: the steps taken before this process's first). Does nothing
  // when no rank has a peer and there is a single replica.
  void watch_stragglers(std::vector<RankWork> ranks, int64_t start);
  // Every step goes to metrics.jsonl with rank 0's own figures; a log step (`line`: every
  // log.interval steps, the first and the last) is also printed, with the job's maxima when
  // they were reduced for it (`job`; also in its metrics row as rss_mb_max, comm_share_max
  // and comm_share_ranks), else rank 0's own. A progress line with the ETA follows every ~10%
  // of the run. A loss that is rank 0's replica's alone is labelled so on the line and the
  // row carries loss_replica (loss_label). With watch_stragglers, a row with the job's figures
  // also carries compute_ms_ranks and the stragglers now (stragglers, straggler_replicas), and
  // a rank or replica that becomes or stops being one gets a line of its own.
  void step(const parallel::StepStats& s, const parallel::StepRunner& trainer, bool line,
            const std::optional<JobMaxima>& job);
  // `sources`: each validation source's loss (a mixture's), written as val_loss/NAME.
  void validation(int64_t steps_done, double val_loss,
                  const std::vector<std::pair<std::string, double>>& sources = {});
  // first_label: loss_label of the first step's stats (the last step's loss is always the job's).
  // With watch_stragglers also who straggled during the run.
  void footer(double first_loss, double last_loss, const std::string& model_path, const std::string& first_label = "");

 private:
  const spec::JobSpec& spec_;
  double peak_gflops_;
  std::string peak_source_;
  std::optional<double> floor_;
  MetricsWriter metrics_;
  std::chrono::steady_clock::time_point start_;
  double smoothed_ms_ = 0;  // EMA of step time for the ETA
  bool floor_written_ = false;  // the first metrics row of this process carries entropy_floor
  int64_t next_progress_ = 0;
  std::optional<StragglerDetector> stragglers_;
  using MetricsLists = std::vector<std::pair<std::string, std::vector<MetricsWriter::Object>>>;
  // The straggler check of one row with the job's figures: its metrics lists; what changed
  // goes to `lines` (to print).
  MetricsLists check_stragglers(const JobMaxima& job, std::vector<std::string>& lines);
};

}  // namespace holmes::train
