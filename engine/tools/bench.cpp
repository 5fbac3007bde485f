#include "engine/plan/plan.hpp"
#include "engine/tools/bench.hpp"
#include "model/counts.hpp"

#include <fmt/format.h>

#include <chrono>
#include <tuple>

#include "common/errors.hpp"
#include "engine/data/data.hpp"
#include "engine/runtime/cluster_view.hpp"
#include "engine/train/metrics.hpp"
#include "engine/train/run.hpp"
#include "engine/parallel/trainer.hpp"
#include "model/param_layout.hpp"
#include "backends/backends.hpp"

namespace holmes::tools {

BenchResult run_bench(const spec::JobSpec& spec, int steps, int warmup) {
  if (steps < 1) throw UserError(fmt::format("bench --steps: {} (at least 1 timed step)", steps));
  plan::check_degrees_fit(spec, 1, "bench times one process; train with --nproc-per-node N for a parallel layout");
  runtime::check_precision_device(spec);
  auto data = data::DataSet::open(spec);
  model::Backend backend = train::make_training_backend(spec);
  parallel::Trainer trainer(spec, backend, *data);
  const auto& g = trainer.model().config();
  fmt::print("bench: {}, B={} T={} x {} micro-batch(es), {} warm-up + {} timed steps, {} kernels\n",
             g.global().describe(), spec.train.micro_batch, spec.train.seq_len, trainer.micro_batches(), warmup, steps,
             backend.kernels->name());
  std::fflush(stdout);
  BenchResult r;
  r.steps = steps;
  int64_t step = 0;
  for (; step < warmup; ++step) r.first_loss = trainer.train_step(step).loss;
  double flops = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i, ++step) {
    parallel::StepStats s = trainer.train_step(step);
    flops += s.flops;
    if (step == 0) r.first_loss = s.loss;
    r.last_loss = s.loss;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.ms_per_step = secs * 1e3 / steps;
  r.tokens_per_s = static_cast<double>(trainer.tokens_per_step()) * steps / secs;
  r.gflops = flops / secs / 1e9;
  const model::GptConfig whole = g.global();
  const double llmc_per_token = 6.0 * double(model::model_params(whole)) +
                                6.0 * whole.layers * double(spec.train.seq_len) * whole.hidden;
  r.gflops_llmc = llmc_per_token * r.tokens_per_s / 1e9;
  r.peak_rss_mb = train::peak_rss_mb();
  r.device_mb = backend.memory->device_used_mb();
  std::tie(r.peak_gflops, r.peak_source) = train::job_peak_gflops(spec, train::LoopContext{});
  r.numerics = trainer.numerics();
  return r;
}

std::string bench_line(const BenchResult& r) {
  const std::string mfu = r.peak_gflops > 0 ? fmt::format("{:.1f}%", 100 * r.mfu()) : "unknown";
  const std::string mfu_llmc = r.peak_gflops > 0 ? fmt::format("{:.1f}%", 100 * r.mfu_llmc()) : "unknown";
  return fmt::format("bench: tokens_per_s={:.1f} ms_per_step={:.2f} peak_rss_mb={:.1f} gflops={:.2f} mfu={} "
                     "device_mb={:.0f} precision={} mfu_llmc={}\nbench: mfu = 6 x matmul weights + 12 x L x T x C "
                     "FLOPs per token (PaLM), mfu_llmc = 6 x all parameters + 6 x L x T x C (llm.c), against {}; "
                     "numerics: {}",
                     r.tokens_per_s, r.ms_per_step, r.peak_rss_mb, r.gflops, mfu, r.device_mb,
                     r.numerics.substr(0, r.numerics.find(',')), mfu_llmc, r.peak_source.empty() ? "-" : r.peak_source,
                     r.numerics);
}

}  // namespace holmes::tools
