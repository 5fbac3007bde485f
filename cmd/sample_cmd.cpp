// `holmes-train sample`: generate text from the weights a training run wrote
// (<output_dir>/final/model.bin) or from a checkpoint saved under any parallel plan.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cmd/commands.hpp"
#include "engine/spec/errors.hpp"
#include "engine/train/generate.hpp"
#include "engine/train/export.hpp"
#include "engine/train/tokenizer.hpp"
#include "model/cpu/cpu_kernels.hpp"

namespace holmes::cmd {

namespace {

struct SampleArgs {
  std::string checkpoint, prompt;
  train::SampleOptions opts;
};

int run_sample(const SampleArgs& a) {
  auto weights = train::load_full_model(a.checkpoint);
  auto kernels = model::cpu::make_cpu_kernels();
  model::Gpt gpt(weights.config, *kernels, 1, weights.config.max_seq_len);
  if (gpt.num_params() != weights.params.size())
    throw UserError(fmt::format("--checkpoint {}: {} parameters in the file, the model it describes has {}",
                                a.checkpoint, weights.params.size(), gpt.num_params()));
  std::copy(weights.params.begin(), weights.params.end(), gpt.params());
  std::vector<uint16_t> toks16 = {train::kEndOfText};  // a document starts after end-of-text
  train::encode_bytes(a.prompt, &toks16);
  std::vector<int> prompt(toks16.begin(), toks16.end());
  for (int t : prompt)
    if (t >= weights.config.vocab)
      throw UserError(fmt::format("--prompt: byte {} is outside the model's vocabulary of {}", t, weights.config.vocab));
  fmt::print("{}", a.prompt);
  std::fflush(stdout);
  train::generate(gpt, prompt, a.opts, [](int tok) {
    int32_t t = tok;
    fmt::print("{}", train::decode_bytes({&t, 1}));
    std::fflush(stdout);
  });
  fmt::print("\n");
  return 0;
}

}  // namespace

Action add_sample(CLI::App& parent) {
  auto* sub = parent.add_subcommand("sample", "Generate text from a trained model");
  auto a = std::make_shared<SampleArgs>();
  a->opts.stop_token = train::kEndOfText;
  sub->add_option("--checkpoint", a->checkpoint, "A run's output_dir, a checkpoint folder (step-XXXXXXXX) or a folder "
                                                 "with model.bin")->required()->option_text("DIR");
  sub->add_option("--prompt", a->prompt, "Text to continue")->option_text("TEXT");
  sub->add_option("--max-tokens", a->opts.max_new_tokens, "Tokens to generate")->check(CLI::PositiveNumber);
  sub->add_option("--temperature", a->opts.temperature, "Sampling temperature; 0 = greedy")
      ->check(CLI::Range(0.0, 100.0));
  sub->add_option("--top-k", a->opts.top_k, "Sample among the k most likely tokens; 0 = all")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--seed", a->opts.seed, "Random seed of the sampler");
  return [a] { return run_sample(*a); };
}

}  // namespace holmes::cmd
