// The log's job-wide figures (every rank's largest resident memory and communication share,
// each rank's share of its steps and its mean compute per step for the straggler check, the
// stop signal): noted by every rank after each step and
// reduced with a maximum over the ranks, either now (blocking: the first and the last log
// line, a stop, diloco's lines) or in the background (every other log line of a job whose
// loop can start the reduction on a thread of its own), so that no rank waits for it between
// two steps. docs/training.md, "Log".
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <future>
#include <optional>
#include <vector>

#include "engine/train/train_log.hpp"

namespace holmes::train {

// One rank's largest figures over some steps (JobMaxima before the reduction).
struct JobFigures {
  double rss_mb = 0, comm_share = 0;
  double comm_ms = 0, step_ms = 0;  // summed, for this rank's share over those steps
  double compute_ms = 0;            // summed (StepStats::compute_ms), for its mean per step
  int64_t steps = 0;
  void note(double rss, double step, double comm, double compute);
  // The vector the job reduces with a maximum: the maxima, the stop signal and, in jobs of
  // up to kRankFiguresMax ranks, one slot per rank holding its own share, then one per rank
  // holding its mean compute ms per step (zeros elsewhere, so the maximum gathers every
  // rank's) in the same collective: [rss, share, signal, share x world, compute x world].
  std::vector<double> packed(int rank, int world, int stop_signal) const;
};

// A reduced vector as the log shows it: the maxima, and `through`, the last step (1-based)
// whose figures it covers.
JobMaxima maxima_of(const std::vector<double>& job, int64_t through);

class FigureExchange {
 public:
  // The element-wise maximum over every rank (a collective: every rank calls it at the same
  // step); null: one process, the figures are its own.
  using Reduce = std::function<std::vector<double>(std::vector<double>)>;
  // The same reduction started on a thread of its own; the future holds its result. Null:
  // every reduction blocks. Nothing else may use the reduction's group before the future is
  // ready (this class waits for it before any other reduction).
  using Start = std::function<std::future<std::vector<double>>(std::vector<double>)>;
  // Fails a started reduction at once (the group's abort): called when the loop is left by an
  // exception with one still running, whose peers may never take part (one died, or is itself
  // stuck waiting for this rank); the destructor then waits only for it to fail. Null: the
  // destructor waits for the reduction however long it takes (up to the group's time-out).
  using Abort = std::function<void()>;

  FigureExchange(int rank, int world, Reduce reduce, Start start, Abort abort = nullptr);
  ~FigureExchange();
  FigureExchange(FigureExchange&&) = default;
  // After each step, on every rank (compute_ms: StepStats::compute_ms).
  void note(double rss_mb, double step_ms, double comm_ms, double compute_ms);
  // Whether later() can run in the background.
  bool background() const { return static_cast<bool>(start_); }
  // Blocking, after a step: the figures of every step that no shown reduction covered yet,
  // reduced now, with this rank's stop signal. A background reduction
  // still running is waited for first (what it covers is covered again here, so its result
  // is dropped). Returns the reduced vector ([2] is the largest stop signal).
  std::vector<double> now(int stop_signal);
  // Background, after step `done` (needs background()): takes the reduction started at the
  // previous call (waiting for it if it has not finished: normally it had a step's time)
  // and starts one with the steps since. The figures a call returns cover the steps up to
  // that previous call's (JobMaxima::through); nothing at the first call after now().
  std::optional<JobMaxima> later(int64_t done);
  // Waits for a background reduction still running (rethrows its failure); before any other
  // use of its group.
  void finish();

 private:
  int rank_, world_;
  Reduce reduce_;
  Start start_;
  Abort abort_;
  int unwinding_;  // std::uncaught_exceptions() at construction
  JobFigures unsent_;   // the steps since the last reduction started
  JobFigures unshown_;  // the steps after those the last shown reduction covered
  std::future<std::vector<double>> pending_;
  int64_t pending_through_ = 0;
};

}  // namespace holmes::train
