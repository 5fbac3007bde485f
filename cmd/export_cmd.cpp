// `holmes-train export`: a checkpoint or a run's final weights -> Hugging Face (the
// architecture's map: GPT2LMHeadModel, LlamaForCausalLM; model.safetensors + config.json). The conversion lives in engine/tools/export.hpp.
#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "cmd/commands.hpp"
#include "engine/checkpoint/hf_format.hpp"
#include "engine/tools/export.hpp"
#include "engine/tools/model_tokenizer.hpp"

namespace holmes::cmd {

namespace {

int run_export(const std::string& checkpoint, const std::string& out) {
  const tools::FullModel m = tools::load_full_model(checkpoint);
  // Found (and checked against the model) before anything is written.
  const tools::ModelTokenizer tokenizer = tools::model_tokenizer(checkpoint, m, "", /*required=*/false);
  const tools::ExportResult r = tools::write_hf_export(m.config, m.params, out);
  const auto& c = m.config;
  if (r.replaced_previous) fmt::print("export: {} held a previous export; replaced it\n", out);
  fmt::print("export: read {} ({}, T={})\n", m.source, c.describe(), c.max_seq_len);
  fmt::print("export: wrote {}/{} ({} tensors, {:.1f} MB, F32; {}) and {}/{} ({})\n", out, tools::kSafetensorsFile,
             r.tensor_count, static_cast<double>(r.safetensors_bytes) / 1e6, checkpoint::hf_head_note(c), out,
             tools::kHfConfigFile, checkpoint::hf_map(c).classes().front());
  fmt::print("export: tokenizer: {}\n", tools::export_tokenizer(tokenizer, out));
  return 0;
}

}  // namespace

Action add_export(CLI::App& parent) {
  auto* sub = parent.add_subcommand("export", "Write a checkpoint as Hugging Face safetensors (GPT-2 or Llama)");
  auto ckpt = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  sub->add_option("--checkpoint", *ckpt, "Checkpoint folder (step-XXXXXXXX) or a folder with model.bin (a run's "
                                         "<output_dir>/final)")->required()->option_text("DIR");
  sub->add_option("--out", *out, "Output folder: new, empty, or holding a previous export")
      ->required()->option_text("DIR");
  return [ckpt, out] { return run_export(*ckpt, *out); };
}

}  // namespace holmes::cmd
