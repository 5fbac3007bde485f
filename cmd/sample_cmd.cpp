// `holmes-train sample`: not built yet; parses its options so --help is accurate.
#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "cmd/commands.hpp"

namespace holmes::cmd {

Action add_sample(CLI::App& parent) {
  auto* sub = parent.add_subcommand("sample", "Generate text from a trained model");
  auto ckpt = std::make_shared<std::string>();
  auto prompt = std::make_shared<std::string>();
  sub->add_option("--checkpoint", *ckpt, "Checkpoint folder")->required()->option_text("DIR");
  sub->add_option("--prompt", *prompt, "Text to continue")->option_text("TEXT");
  return [] { return not_available("sample"); };
}

}  // namespace holmes::cmd
