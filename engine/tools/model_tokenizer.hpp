// The tokenizer of a trained model, for sample, eval --text and export: the copy its run kept
// (engine/train/run_tokenizer.hpp) found beside the path the user gave, checked against the
// hash the checkpoint recorded and the model's vocabulary; or the one named by --tokenizer.
#pragma once

#include <memory>
#include <string>

#include "engine/tokenizer/tokenizer.hpp"
#include "engine/tools/export.hpp"

namespace holmes::tools {

struct ModelTokenizer {
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;  // null when none is known (see below)
  std::string from;                                // the folder or spec it was read from
};

// `override_spec` non-empty: that tokenizer (--tokenizer SPEC). Otherwise the saved tokenizer
// in `checkpoint` itself or a "tokenizer" folder in it or in one of its three nearest parent
// folders (a step folder's run folder, final/'s). A model of 257 ids with none recorded is the
// byte tokenizer's (the synthetic data). `required`: UserError when none is found; else a null
// tokenizer. UserError naming both when the found one has another hash than the checkpoint
// recorded, or more ids than the model's vocabulary.
ModelTokenizer model_tokenizer(const std::string& checkpoint, const FullModel& m, const std::string& override_spec,
                               bool required);

// export: writes `mt` (model_tokenizer(..., required = false)) into out_dir as Hugging Face
// reads it: tokenizer.json for byte-level BPE (engine/tokenizer/hf_export.hpp),
// tokenizer.model for SentencePiece. Returns what it wrote, or why nothing (no tokenizer
// known, or the byte tokenizer, which Hugging Face has no file for).
std::string export_tokenizer(const ModelTokenizer& mt, const std::string& out_dir);

inline constexpr const char* kHfTokenizerFile = "tokenizer.json";
inline constexpr const char* kSentencePieceFile = "tokenizer.model";

}  // namespace holmes::tools
