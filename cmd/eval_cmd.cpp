// `holmes-train eval`: mean next-token loss of a model (checkpoint or final weights) on a token
// file (engine/tools/model_tools.hpp says which sequences).
#include <fmt/format.h>

#include <cmath>
#include <memory>

#include "cmd/commands.hpp"
#include "cmd/option_values.hpp"
#include "engine/tools/model_tools.hpp"

namespace holmes::cmd {

Action add_eval(CLI::App& parent) {
  auto* sub = parent.add_subcommand("eval", "Mean next-token loss of a model on a token or text file");
  auto a = std::make_shared<tools::EvalRequest>();
  sub->add_option("--checkpoint", a->checkpoint, "Checkpoint folder (step-XXXXXXXX) or a folder with model.bin (a "
                                                 "run's <output_dir>/final)")->required()->option_text("DIR");
  sub->add_option("--tokens", a->tokens, "Token file (llm.c format or raw uint16)")->option_text("FILE");
  sub->add_option("--text", a->text, "Text file, tokenized with the model's tokenizer (instead of --tokens)")
      ->option_text("FILE");
  sub->add_option("--tokenizer", a->tokenizer, "Tokenizer SPEC for --text instead of the one the run kept")
      ->option_text("SPEC");
  sub->add_option("--format", a->format, "Token file format")->check(one_of({"auto", "llmc", "raw-uint16", "megatron"}))
      ->capture_default_str();
  add_number(*sub, "--batch-size", a->batch_size, "Sequences per batch", 1);
  add_number(*sub, "--seq-len", a->seq_len, "Tokens per sequence (default: the model's max_seq_len)", 1);
  add_number(*sub, "--batches", a->batches, "Batches to evaluate; 0 = every full batch in the file", 0);
  return [a] {
    const tools::EvalResult r = tools::evaluate_model(*a);
    fmt::print("loss {:.7f}\nperplexity {:.4f}\nloss_exact {:.17g}\n", r.loss, std::exp(r.loss), r.loss);
    return 0;
  };
}

}  // namespace holmes::cmd
