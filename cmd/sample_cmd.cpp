// `holmes-train sample`: generate text from the weights a training run wrote
// (<output_dir>/final/model.bin) or from a checkpoint saved under any parallel plan.
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <string>

#include "cmd/commands.hpp"
#include "engine/tools/model_tools.hpp"
#include "engine/data/tokenizer.hpp"

namespace holmes::cmd {

namespace {

struct SampleArgs {
  std::string checkpoint, prompt;
  train::SampleOptions opts;
};

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
  return [a] {
    fmt::print("{}", a->prompt);
    std::fflush(stdout);
    train::sample_model(a->checkpoint, a->prompt, a->opts, [](const std::string& text) {
      fmt::print("{}", text);
      std::fflush(stdout);
    });
    fmt::print("\n");
    return 0;
  };
}

}  // namespace holmes::cmd
