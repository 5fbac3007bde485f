// `holmes-train bench`: training steps timed after a warm-up, on the job's model and data.
#pragma once

#include <cstdint>
#include <string>

#include "engine/spec/job_spec.hpp"

namespace holmes::tools {

struct BenchResult {
  int steps = 0;
  double tokens_per_s = 0;  // global_batch * seq_len * steps / time
  double ms_per_step = 0;
  double peak_rss_mb = 0;   // process high-water mark (VmHWM), data and model included
  double gflops = 0;        // model FLOP/s achieved (6N + attention, as in the training log)
  double gflops_llmc = 0;   // the same time by llm.c's count: 6 N + 6 L T C per token, N every parameter
  double peak_gflops = 0;   // the peak MFU is against (run.hpp job_peak_gflops); 0 = unknown
  std::string peak_source;
  double device_mb = 0;     // device memory in use after the timed steps (GPU; 0 on the CPU)
  std::string numerics;     // precision and attention method
  double mfu() const { return peak_gflops > 0 ? gflops / peak_gflops : 0; }
  double mfu_llmc() const { return peak_gflops > 0 ? gflops_llmc / peak_gflops : 0; }
  double first_loss = 0, last_loss = 0;
};

// Runs `warmup` untimed then `steps` timed optimizer steps (single process).
BenchResult run_bench(const spec::JobSpec& spec, int steps, int warmup);

// The one summary line: "bench: tokens_per_s=... ms_per_step=... peak_rss_mb=... gflops=...
// mfu=...% device_mb=... precision=... mfu_llmc=...%" (the first four keys keep their order for
// scripts), and a line naming the two FLOP counts and the peak. mfu: model::shard_train_flops, 3 x
// (2 x the matmul weights a token meets, the LM head included + 4 T C per layer for QK^T and
// the weighted sum over all T keys) = 6 N_matmul + 12 L T C (PaLM's form); mfu_llmc: llm.c's
// 6 N + 6 L T C with N every parameter, embeddings included.
std::string bench_line(const BenchResult& r);

}  // namespace holmes::tools
