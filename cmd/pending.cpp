// Subcommands whose implementation lands with later work. They parse their options so that
// --help is accurate, then say plainly that they are not available; they never pretend.
#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "cmd/commands.hpp"

namespace holmes::cmd {

int not_available(const char* what) {
  fmt::print(stderr, "holmes-train: `{}` is not available in this build yet\n", what);
  return 1;
}

Action add_discover(CLI::App& parent) {
  auto* sub = parent.add_subcommand("discover", "Print this node's network cards and compute devices");
  auto root = std::make_shared<std::string>("/");
  auto format = std::make_shared<std::string>("text");
  sub->add_option("--sysfs-root", *root, "Read sysfs under this folder instead of /")->option_text("DIR");
  sub->add_option("--format", *format, "Output format")->check(CLI::IsMember({"text", "json", "yaml"}));
  return [] { return not_available("discover"); };
}

Action add_bench(CLI::App& parent) {
  auto* sub = parent.add_subcommand("bench", "Time training steps and print one summary line");
  auto config = std::make_shared<std::string>();
  auto steps = std::make_shared<int>(20);
  auto sets = std::make_shared<std::vector<std::string>>();
  sub->add_option("-c,--config", *config, "Job spec (YAML)")->option_text("FILE");
  sub->add_option("--steps", *steps, "Timed steps after the warm-up")->check(CLI::PositiveNumber);
  sub->add_option("--set", *sets, "Override a key of the job spec (repeatable)")->option_text("KEY=VALUE");
  return [] { return not_available("bench"); };
}

Action add_export(CLI::App& parent) {
  auto* sub = parent.add_subcommand("export", "Write a checkpoint as Hugging Face GPT-2 safetensors");
  auto ckpt = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  sub->add_option("--checkpoint", *ckpt, "Checkpoint folder")->required()->option_text("DIR");
  sub->add_option("--out", *out, "Output folder")->required()->option_text("DIR");
  return [] { return not_available("export"); };
}

Action add_sample(CLI::App& parent) {
  auto* sub = parent.add_subcommand("sample", "Generate text from a trained model");
  auto ckpt = std::make_shared<std::string>();
  auto prompt = std::make_shared<std::string>();
  sub->add_option("--checkpoint", *ckpt, "Checkpoint folder")->required()->option_text("DIR");
  sub->add_option("--prompt", *prompt, "Text to continue")->option_text("TEXT");
  return [] { return not_available("sample"); };
}

Action add_prepare_data(CLI::App& parent) {
  auto* sub = parent.add_subcommand("prepare-data", "Turn text files into a token file (byte-level tokenizer)");
  auto inputs = std::make_shared<std::vector<std::string>>();
  auto out = std::make_shared<std::string>();
  sub->add_option("--input", *inputs, "Text files to tokenize")->required()->option_text("FILE...");
  sub->add_option("--out", *out, "Token file to write (llm.c format)")->required()->option_text("FILE");
  return [] { return not_available("prepare-data"); };
}

}  // namespace holmes::cmd
