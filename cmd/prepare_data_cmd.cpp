// `holmes-train prepare-data`: text files -> one llm.c token file (byte-level tokenizer,
// end-of-text before each file's document).
#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "cmd/commands.hpp"
#include "engine/data/tokenizer.hpp"

namespace holmes::cmd {

Action add_prepare_data(CLI::App& parent) {
  auto* sub = parent.add_subcommand("prepare-data", "Turn text files into a token file (byte-level tokenizer)");
  auto inputs = std::make_shared<std::vector<std::string>>();
  auto out = std::make_shared<std::string>();
  sub->add_option("--input", *inputs, "Text files to tokenize (each one document)")->required()->option_text("FILE...");
  sub->add_option("--out", *out, "Token file to write (llm.c format)")->required()->option_text("FILE");
  return [inputs, out] {
    int64_t n = data::prepare_byte_tokens(*inputs, *out);
    fmt::print("prepare-data: wrote {} tokens from {} file(s) to {} (llm.c format, byte-level vocabulary {}, "
               "end-of-text = {})\n", n, inputs->size(), *out, data::kByteVocab, data::kEndOfText);
    return 0;
  };
}

}  // namespace holmes::cmd
