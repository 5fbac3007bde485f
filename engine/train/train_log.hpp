// What a training run prints and records: a header, one line per logged step in the style
// of Megatron-LM / torchtitan, validation lines, a progress line with the ETA, and the same
// numbers as JSON lines in <job.output_dir>/<log.metrics>.
#pragma once

#include "common/format.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "engine/spec/job_spec.hpp"
#include "engine/train/metrics.hpp"
#include "engine/train/step_runner.hpp"

namespace holmes::train {

class TrainLog {
 public:
  // peak_gflops: the device's peak for MFU; peak_source says where it came from.
  // append_metrics: a resumed run continues metrics.jsonl.
  TrainLog(const spec::JobSpec& spec, double peak_gflops, std::string peak_source,
           std::optional<double> entropy_floor, bool append_metrics = false);

  void header(const StepRunner& trainer, const std::string& data_description) const;
  // Every step goes to metrics.jsonl; a line is printed every log.interval steps, at the
  // first and at the last step. A progress line with the ETA follows every ~10% of the run.
  // rss: resident memory in MB to report (the maximum over the job's ranks).
  void step(const StepStats& s, const StepRunner& trainer, double rss);
  void validation(int64_t steps_done, double val_loss);
  void footer(double first_loss, double last_loss, const std::string& model_path);

 private:
  const spec::JobSpec& spec_;
  double peak_gflops_;
  std::string peak_source_;
  std::optional<double> floor_;
  MetricsWriter metrics_;
  std::chrono::steady_clock::time_point start_;
  double smoothed_ms_ = 0;  // EMA of step time for the ETA
  int64_t next_progress_ = 0;
};

}  // namespace holmes::train
