// `holmes-train prepare-data`: not built yet; parses its options so --help is accurate.
#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "cmd/commands.hpp"

namespace holmes::cmd {

Action add_prepare_data(CLI::App& parent) {
  auto* sub = parent.add_subcommand("prepare-data", "Turn text files into a token file (byte-level tokenizer)");
  auto inputs = std::make_shared<std::vector<std::string>>();
  auto out = std::make_shared<std::string>();
  sub->add_option("--input", *inputs, "Text files to tokenize")->required()->option_text("FILE...");
  sub->add_option("--out", *out, "Token file to write (llm.c format)")->required()->option_text("FILE");
  return [] { return not_available("prepare-data"); };
}

}  // namespace holmes::cmd
