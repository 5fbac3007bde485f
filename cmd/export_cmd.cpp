// `holmes-train export`: not built yet; parses its options so --help is accurate.
#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "cmd/commands.hpp"

namespace holmes::cmd {

Action add_export(CLI::App& parent) {
  auto* sub = parent.add_subcommand("export", "Write a checkpoint as Hugging Face GPT-2 safetensors");
  auto ckpt = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  sub->add_option("--checkpoint", *ckpt, "Checkpoint folder")->required()->option_text("DIR");
  sub->add_option("--out", *out, "Output folder")->required()->option_text("DIR");
  return [] { return not_available("export"); };
}

}  // namespace holmes::cmd
