#include "engine/train/train_log.hpp"
#include "engine/spec/run_paths.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "common/format.hpp"
#include "engine/parallel/trainer.hpp"
#include "model/counts.hpp"
#include "model/param_layout.hpp"

namespace holmes::train {

namespace {

std::string metrics_path(const spec::JobSpec& spec) {
  return spec::RunPaths::of(spec).metrics;
}

}  // namespace

TrainLog::TrainLog(const spec::JobSpec& spec, double peak_gflops, std::string peak_source,
                   std::optional<double> entropy_floor, bool append_metrics)
    : spec_(spec), peak_gflops_(peak_gflops), peak_source_(std::move(peak_source)), floor_(entropy_floor),
      metrics_(metrics_path(spec), append_metrics), start_(std::chrono::steady_clock::now()) {}

void TrainLog::header(const parallel::StepRunner& trainer, const std::string& data_description) const {
  const auto& g = trainer.shard_config();
  const auto& t = spec_.train;
  fmt::print("holmes-train: job '{}' on {} ({} kernels), output {}\n", spec_.job.name, trainer.backend_name(),
             trainer.kernels_name(), spec_.job.output_dir);
  fmt::print("numerics: {}\n", trainer.numerics());
  // The whole model (not this rank's shard), with the vocabulary padded as the job pads it.
  const model::GptConfig whole = g.global();
  fmt::print("model: {}, {} parameters ({} in memory)\n", whole.describe(),
             human_count(static_cast<double>(model::model_params(whole))),
             human_count(static_cast<double>(model::ParamLayout(whole).size())));
  fmt::print("{}\n", data_description);
  if (floor_) fmt::print("entropy floor: {:.4f} nats/token (exact entropy rate of the synthetic source)\n", *floor_);
  const parallel::LrConfig lr = parallel::lr_config_of(spec_);
  fmt::print("train: {} steps x {} sequences x {} tokens = {} tokens/step ({} micro-batch(es) of {}), lr {:g} -> {:g} "
             "{} by tokens seen with {} warm-up tokens, decay to {} tokens, clip {:g}, weight decay {:g}\n",
             t.steps, t.global_batch, t.seq_len, trainer.tokens_per_step(), trainer.micro_batches(), t.micro_batch,
             t.lr, t.min_lr, t.lr_schedule, lr.warmup_tokens, lr.total_tokens, t.grad_clip, t.weight_decay);
  fmt::print("speed: {:.3g} GFLOP per token; MFU = the job's model FLOP/s against its peak {:.1f} GFLOP/s = {}\n",
             trainer.flops_per_token() / 1e9, peak_gflops_, peak_source_);
  std::fflush(stdout);
}

void TrainLog::watch_stragglers(std::vector<RankWork> ranks, int64_t start) {
  StragglerDetector d(std::move(ranks), {spec_.log.straggler_threshold, spec_.log.straggler_lines}, start);
  if (d.ranks() > 1 && d.ranks() <= kRankFiguresMax && d.compares()) stragglers_.emplace(std::move(d));
}

TrainLog::MetricsLists TrainLog::check_stragglers(const JobMaxima& job, std::vector<std::string>& lines) {
  if (!stragglers_ || job.compute_ms_ranks.size() != static_cast<size_t>(stragglers_->ranks())) return {};
  for (const StragglerEvent& e : stragglers_->observe(job.through, job.compute_ms_ranks))
    lines.push_back("straggler: " + (e.recovered ? describe_recovery(*stragglers_, e.who)
                                                 : describe_straggler(*stragglers_, e.who)));
  std::vector<MetricsWriter::Object> ranks, replicas;
  for (const Straggler& s : stragglers_->current()) {
    const bool rank = s.kind == StragglerKind::kRank;
    (rank ? ranks : replicas)
        .push_back({{rank ? "rank" : "replica", s.id}, {"ratio", s.ratio}, {"since", static_cast<double>(s.since)},
                    {"peers", s.peers}});
  }
  MetricsLists lists = {{"stragglers", ranks}};
  if (stragglers_->replicas() > 1) lists.emplace_back("straggler_replicas", replicas);
  return lists;
}

void TrainLog::step(const parallel::StepStats& s, const parallel::StepRunner& trainer, bool line,
                    const std::optional<JobMaxima>& job) {
  const int64_t done = s.step + 1, total = spec_.train.steps;
  // The whole job's model FLOPs in this step (every rank's share), over rank 0's step time.
  const double job_flops = trainer.flops_per_token() * static_cast<double>(trainer.tokens_per_step());
  const double tflops = job_flops / (s.step_ms / 1e3) / 1e12;
  const double mfu = peak_gflops_ > 0 ? 100.0 * tflops * 1e3 / peak_gflops_ : NAN;
  const double share = s.step_ms > 0 ? s.comm_ms / s.step_ms : 0;
  std::vector<std::pair<std::string, double>> row = {
      {"step", static_cast<double>(done)}, {"loss", s.loss},         {"lr", s.lr},
      {"grad_norm", s.grad_norm},          {"step_ms", s.step_ms},   {"tokens_per_s", s.tokens_per_s},
      {"tflops", tflops},                  {"mfu", mfu},             {"rss_mb", rss_mb()},
      {"comm_ms", s.comm_ms},              {"comm_share", share},    {"cpu_ms", s.cpu_ms},
      {"between_ms", s.between_ms},        {"pipeline_ms", s.pipeline_ms}, {"grad_sync_ms", s.grad_sync_ms},
      {"job_sum_ms", s.job_sum_ms},        {"update_ms", s.update_ms},   {"passes_ms", s.passes_ms},
      {"pipeline_wait_ms", s.pipeline_wait_ms}, {"compute_ms", s.compute_ms}};
  // A diloco step between two outer syncs: `loss` is rank 0's replica's alone (StepStats::agreed);
  // rows without this field carry the job's.
  if (!s.agreed) row.emplace_back("loss_replica", s.replica);
  const double device_mb = trainer.device_mb();
  if (device_mb > 0) row.emplace_back("device_mb", device_mb);
  if (!s.outer.empty()) {  // this rank's outer sync after the step (diloco)
    row.emplace_back("outer_ms", s.outer.total_ms);
    for (const auto& [name, ms] : s.outer.parts()) row.emplace_back(fmt::format("outer_{}_ms", name), ms);
    row.emplace_back("outer_cpu_ms", s.outer.cpu_ms);
    row.emplace_back("outer_bytes", s.outer.bytes);
  }
  if (job) {
    row.emplace_back("rss_mb_max", job->rss_mb);
    row.emplace_back("comm_share_max", job->comm_share);
    row.emplace_back("figures_step", static_cast<double>(job->through));
  }
  // The floor once per start of the process (a resumed run repeats it), for the run report.
  if (floor_ && !floor_written_) row.emplace_back("entropy_floor", *floor_);
  floor_written_ = true;
  std::vector<std::pair<std::string, std::vector<double>>> arrays;
  if (job && !job->comm_share_ranks.empty()) arrays.emplace_back("comm_share_ranks", job->comm_share_ranks);
  if (job && !job->compute_ms_ranks.empty()) arrays.emplace_back("compute_ms_ranks", job->compute_ms_ranks);
  // parallel.elastic: the replicas (numbered as at the start) that trained this step.
  if (!s.replicas.empty()) arrays.emplace_back("replicas", std::vector<double>(s.replicas.begin(), s.replicas.end()));
  std::vector<std::string> straggler_lines;  // printed after the step's line
  metrics_.write(row, arrays, job ? check_stragglers(*job, straggler_lines) : MetricsLists{});
  smoothed_ms_ = smoothed_ms_ == 0 ? s.step_ms : 0.9 * smoothed_ms_ + 0.1 * s.step_ms;
  if (line) {
    // Multi-process: the share of the step rank 0 and the most-waiting rank spent in communication
    // (rank 0's alone on a line without the job's maxima).
    // The job's figures reduced in the background cover the steps up to an earlier one.
    const std::string upto = job && job->through != done ? fmt::format(" to step {}", job->through) : "";
    const std::string comm =
        job && job->comm_share > 0 ? fmt::format(" | comm {:.0f}% (max rank {:.0f}%{})", 100.0 * share, 100.0 * job->comm_share, upto)
        : !job && s.comm_ms > 0    ? fmt::format(" | comm {:.0f}% (rank 0)", 100.0 * share)
                                   : "";
    fmt::print("step {:>{}}/{} | loss {:.4f}{} | lr {:.3e} | grad_norm {:.4f} | {:.1f} ms | {} tok/s | {:.3f} TFLOP/s | "
               "MFU {:.1f}% | rss {:.0f} MiB{}{}\n",
               done, fmt::formatted_size("{}", total), total, s.loss, loss_label(s), s.lr, s.grad_norm, s.step_ms,
               human_count(s.tokens_per_s), tflops, mfu, job ? job->rss_mb : rss_mb(),
               device_mb > 0 ? fmt::format(" | gpu {:.0f} MiB", device_mb) : "", comm);
  }
  for (const std::string& l : straggler_lines) fmt::print("{}\n", l);
  if (!s.outer.empty())
    fmt::print("outer sync after step {} ({}{}): {}\n", done,
               s.outer.syncs > 0 ? count_of(s.outer.syncs, "fragment") + " sent" : "",
               s.outer.applied > 0 ? (s.outer.syncs > 0 ? ", " : "") + count_of(s.outer.applied, "fragment") + " applied" : "",
               s.outer.describe());
  if (done >= next_progress_ && done < total) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double eta = static_cast<double>(total - done) * smoothed_ms_ / 1e3;
    if (done > 1)
      fmt::print("progress: {}/{} steps ({:.0f}%), elapsed {}, ETA {}\n", done, total, 100.0 * done / total,
                 format_duration(elapsed), format_duration(eta));
    next_progress_ = done + std::max<int64_t>(1, total / 10);
  }
  std::fflush(stdout);
}

void TrainLog::validation(int64_t steps_done, double val_loss,
                          const std::vector<std::pair<std::string, double>>& sources) {
  std::vector<std::pair<std::string, double>> row = {{"step", static_cast<double>(steps_done)}, {"val_loss", val_loss}};
  for (const auto& [name, loss] : sources) row.emplace_back("val_loss/" + name, loss);
  if (floor_) row.emplace_back("entropy_floor", *floor_);
  metrics_.write(row);
  if (floor_)
    fmt::print("validation at step {}: val_loss {:.4f} | floor {:.4f} | gap {:.4f} nats/token\n", steps_done, val_loss,
               *floor_, val_loss - *floor_);
  else
    fmt::print("validation at step {}: val_loss {:.4f} (perplexity {:.2f})\n", steps_done, val_loss,
               std::exp(val_loss));
  if (!sources.empty()) {
    std::string per;
    for (const auto& [name, loss] : sources) per += fmt::format("{}{} {:.4f}", per.empty() ? "" : ", ", name, loss);
    fmt::print("validation at step {}: by source: {}\n", steps_done, per);
  }
  std::fflush(stdout);
}

std::string loss_label(const parallel::StepStats& s) {
  return s.agreed ? "" : fmt::format(" (replica {})", s.replica);
}

void TrainLog::footer(double first_loss, double last_loss, const std::string& model_path, const std::string& first_label) {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  // A run resumed from a checkpoint already at train.steps takes no step: no losses to show.
  const std::string losses = std::isfinite(first_loss)
                                 ? fmt::format("loss {:.4f}{} -> {:.4f}", first_loss, first_label, last_loss)
                                 : std::string("no step taken (the checkpoint was already at train.steps)");
  fmt::print("done: {} steps in {}, {}, peak rss {:.0f} MiB; weights in {}\n", spec_.train.steps,
             format_duration(elapsed), losses, peak_rss_mb(), model_path);
  if (stragglers_) {
    const std::vector<Straggler>& named = stragglers_->history();
    fmt::print("stragglers: {} (compute over {:.2f}x the peers' median for {} log line(s) in a row)\n",
               named.empty() ? std::string("none") : fmt::format("{} named", named.size()),
               1 + spec_.log.straggler_threshold, spec_.log.straggler_lines);
    for (const Straggler& s : named) fmt::print("  {}\n", describe_spell(*stragglers_, s));
  }
  std::fflush(stdout);
}

}  // namespace holmes::train
