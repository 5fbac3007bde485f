// What `holmes-train eval` and `holmes-train sample` do, as one engine call each: load a
// whole model from wherever a run left it (load_full_model), put it on a backend, and
// evaluate it on a token file or continue a prompt. cmd/ only parses the options.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "engine/tools/generate.hpp"

namespace holmes::tools {

struct EvalRequest {
  std::string checkpoint, tokens, format = "auto";
  std::string text;       // instead of tokens: a text file, tokenized with the model's tokenizer
  std::string tokenizer;  // --tokenizer SPEC: instead of the one the run kept
  int batch_size = 4;
  int seq_len = 0;  // 0 = the model's max_seq_len
  int batches = 8;  // 0 = every full batch in the file
};
struct EvalResult {
  double loss = 0;     // mean next-token loss over batches x batch_size x seq_len targets
  int64_t batches = 0;
};

// Mean next-token loss of a model on a token file, or on a text file (one document: the
// document token, then its tokens). Sequences are the chunks of T+1 tokens
// validation reads (chunk i = tokens [i*T, i*T + T]), in order from the start of the file:
// batch k holds chunks [k*B, (k+1)*B). No shuffling, so another implementation can recompute
// the number (test/python/check_export.py does). The forward loop is the trainer's
// validation loop (PipelineStage::run_forward). Prints what it evaluates. UserError naming
// the option for a bad checkpoint, token or text file or size; a token file stamped with
// another tokenizer than the model's is refused naming both.
EvalResult evaluate_model(const EvalRequest& r);

// Continues `prompt` with the model at `checkpoint`: the prompt is tokenized with the model's
// tokenizer (model_tokenizer.hpp; `tokenizer_spec` non-empty overrides it) after the document
// token, as every document starts; generation stops after a document token. on_text sees the
// decoded text as it comes. UserError naming --checkpoint, --tokenizer or --prompt.
void sample_model(const std::string& checkpoint, const std::string& prompt, const SampleOptions& o,
                  const std::function<void(const std::string&)>& on_text, const std::string& tokenizer_spec = "");

}  // namespace holmes::tools
