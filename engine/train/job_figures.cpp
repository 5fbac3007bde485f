#include "engine/train/job_figures.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <utility>

namespace holmes::train {

void JobFigures::note(double rss, double step, double comm, double compute) {
  rss_mb = std::max(rss_mb, rss);
  comm_share = std::max(comm_share, step > 0 ? comm / step : 0.0);
  comm_ms += comm;
  step_ms += step;
  compute_ms += compute;
  ++steps;
}

std::vector<double> JobFigures::packed(int rank, int world, int stop_signal) const {
  std::vector<double> v = {rss_mb, comm_share, static_cast<double>(stop_signal)};
  if (world > 1 && world <= kRankFiguresMax) {
    const auto n = static_cast<size_t>(world), r = static_cast<size_t>(rank);
    v.resize(3 + 2 * n, 0.0);
    v[3 + r] = step_ms > 0 ? comm_ms / step_ms : 0.0;
    v[3 + n + r] = steps > 0 ? compute_ms / static_cast<double>(steps) : 0.0;
  }
  return v;
}

JobMaxima maxima_of(const std::vector<double>& job, int64_t through) {
  // [rss, share, signal] and nothing else, or two slots per rank after them.
  const size_t n = job.size() > 3 ? (job.size() - 3) / 2 : 0;
  if (job.size() < 3 || job.size() != 3 + 2 * n)
    throw std::invalid_argument(fmt::format("job figures: {} values, expected 3 + 2 x ranks", job.size()));
  const auto mid = job.begin() + 3 + static_cast<long>(n);
  return JobMaxima{job[0], job[1], std::vector<double>(job.begin() + 3, mid), std::vector<double>(mid, job.end()),
                   through};
}

FigureExchange::FigureExchange(int rank, int world, Reduce reduce, Start start, Abort abort)
    : rank_(rank),
      world_(world),
      reduce_(std::move(reduce)),
      start_(std::move(start)),
      abort_(std::move(abort)),
      unwinding_(std::uncaught_exceptions()) {}

FigureExchange::~FigureExchange() {
  if (!pending_.valid() || !abort_ || std::uncaught_exceptions() <= unwinding_) return;
  if (pending_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) abort_();
}

void FigureExchange::note(double rss_mb, double step_ms, double comm_ms, double compute_ms) {
  unsent_.note(rss_mb, step_ms, comm_ms, compute_ms);
  unshown_.note(rss_mb, step_ms, comm_ms, compute_ms);
}

void FigureExchange::finish() {
  if (pending_.valid()) pending_.get();
}

std::vector<double> FigureExchange::now(int stop_signal) {
  finish();  // its steps are in unshown_: reduced again below
  std::vector<double> v = unshown_.packed(rank_, world_, stop_signal);
  if (reduce_) v = reduce_(std::move(v));
  unsent_ = {};
  unshown_ = {};
  return v;
}

std::optional<JobMaxima> FigureExchange::later(int64_t done) {
  std::optional<JobMaxima> taken;
  if (pending_.valid()) {
    taken = maxima_of(pending_.get(), pending_through_);
    unshown_ = unsent_;  // the steps after those the taken figures cover
  }
  pending_ = start_(unsent_.packed(rank_, world_, 0));
  pending_through_ = done;
  unsent_ = {};
  return taken;
}

}  // namespace holmes::train
