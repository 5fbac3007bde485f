// `holmes-train sample`: generate text from the weights a training run wrote
// (<output_dir>/final/model.bin) or from a checkpoint saved under any parallel plan.
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <string>

#include "cmd/commands.hpp"
#include "cmd/option_values.hpp"
#include "engine/tools/model_tools.hpp"

namespace holmes::cmd {

namespace {

struct SampleArgs {
  std::string checkpoint, prompt, tokenizer;
  tools::SampleOptions opts;
};

}  // namespace

Action add_sample(CLI::App& parent) {
  auto* sub = parent.add_subcommand("sample", "Generate text from a trained model");
  auto a = std::make_shared<SampleArgs>();
  sub->add_option("--checkpoint", a->checkpoint, "A run's output_dir, a checkpoint folder (step-XXXXXXXX) or a folder "
                                                 "with model.bin")->required()->option_text("DIR");
  sub->add_option("--prompt", a->prompt, "Text to continue")->option_text("TEXT");
  sub->add_option("--tokenizer", a->tokenizer, "Tokenizer SPEC (as prepare-data's) instead of the one the run kept")
      ->option_text("SPEC");
  add_number(*sub, "--max-tokens", a->opts.max_new_tokens, "Tokens to generate", 1);
  add_number(*sub, "--temperature", a->opts.temperature, "Sampling temperature; 0 = greedy", 0.0f, 100.0f);
  add_number(*sub, "--top-k", a->opts.top_k, "Sample among the k most likely tokens; 0 = all", 0);
  add_number(*sub, "--seed", a->opts.seed, "Random seed of the sampler", uint64_t{0});
  return [a] {
    fmt::print("{}", a->prompt);
    std::fflush(stdout);
    tools::sample_model(
        a->checkpoint, a->prompt, a->opts,
        [](const std::string& text) {
          fmt::print("{}", text);
          std::fflush(stdout);
        },
        a->tokenizer);
    fmt::print("\n");
    return 0;
  };
}

}  // namespace holmes::cmd
