// `holmes-train eval`: mean next-token loss of a model (checkpoint or final weights) on a token
// file. Sequences are the chunks of T+1 tokens that validation reads (chunk i = tokens
// [i*T, i*T + T], consecutive chunks share one token), taken in order from the start of the
// file: batch k holds chunks [k*B, (k+1)*B). No shuffling, so the number is reproducible and
// another implementation can recompute it (test/python/check_export.py does).
#include <fmt/format.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "cmd/commands.hpp"
#include "engine/spec/errors.hpp"
#include "engine/train/batches.hpp"
#include "engine/train/export.hpp"
#include "engine/train/token_file.hpp"
#include "model/cpu/cpu_kernels.hpp"
#include "model/gpt.hpp"

namespace holmes::cmd {

namespace {

struct EvalArgs {
  std::string checkpoint, tokens, format = "auto";
  int batch_size = 4;
  int seq_len = 0;   // 0 = the model's max_seq_len
  int batches = 8;   // 0 = every full batch in the file
};

int run_eval(const EvalArgs& a) {
  train::FullModel m = train::load_full_model(a.checkpoint);
  const model::GptConfig& c = m.config;
  const int T = a.seq_len > 0 ? a.seq_len : c.max_seq_len, B = a.batch_size;
  if (T > c.max_seq_len)
    throw UserError(fmt::format("--seq-len {}: longer than the model's {} positions (accepted: 1..{})", T,
                                c.max_seq_len, c.max_seq_len));
  const auto file = train::TokenFile::open(a.tokens, train::parse_token_format(a.format, "--format"), c.vocab);
  const train::BatchSampler sampler({file.tokens()}, T, 0, /*shuffle=*/false);
  const int64_t available = sampler.chunk_count() / B;
  const int64_t batches = a.batches > 0 ? a.batches : available;
  if (batches < 1 || batches > available)
    throw UserError(fmt::format("--batches {} x --batch-size {}: {} holds {} tokens = {} sequences of {}+1 tokens, "
                                "enough for {} batches (accepted: --batches 1..{}, or 0 for all)",
                                a.batches, B, a.tokens, file.tokens().size(), sampler.chunk_count(), T, available,
                                available));
  auto kernels = model::cpu::make_cpu_kernels();
  model::Gpt gpt(c, *kernels, B, T);
  std::copy(m.params.begin(), m.params.end(), gpt.params());
  fmt::print("eval: model {} (L={} C={} NH={} V={})\n", m.source, c.layers, c.hidden, c.heads, c.vocab);
  fmt::print("eval: {} ({} tokens): {} batches x {} sequences of {}+1 tokens, in order from the start\n", a.tokens,
             file.tokens().size(), batches, B, T);
  std::vector<int32_t> inputs(static_cast<size_t>(B) * T), targets(inputs.size());
  double sum = 0.0;
  for (int64_t k = 0; k < batches; ++k) {
    for (int b = 0; b < B; ++b)
      sampler.fill_sequence(k * B + b, inputs.data() + static_cast<size_t>(b) * T,
                            targets.data() + static_cast<size_t>(b) * T);
    sum += gpt.forward(inputs.data(), targets.data(), B, T);  // mean over B*T targets
  }
  const double loss = sum / static_cast<double>(batches);  // equal-sized batches: the mean over all targets
  fmt::print("loss {:.7f}\n", loss);
  fmt::print("perplexity {:.4f}\n", std::exp(loss));
  return 0;
}

}  // namespace

Action add_eval(CLI::App& parent) {
  auto* sub = parent.add_subcommand("eval", "Mean next-token loss of a model on a token file");
  auto a = std::make_shared<EvalArgs>();
  sub->add_option("--checkpoint", a->checkpoint, "Checkpoint folder (step-XXXXXXXX) or a folder with model.bin (a "
                                                 "run's <output_dir>/final)")->required()->option_text("DIR");
  sub->add_option("--tokens", a->tokens, "Token file (llm.c format or raw uint16)")->required()->option_text("FILE");
  sub->add_option("--format", a->format, "Token file format: auto, llmc, raw-uint16")->capture_default_str();
  sub->add_option("--batch-size", a->batch_size, "Sequences per batch")->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--seq-len", a->seq_len, "Tokens per sequence (default: the model's max_seq_len)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--batches", a->batches, "Batches to evaluate; 0 = every full batch in the file")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  return [a] { return run_eval(*a); };
}

}  // namespace holmes::cmd
