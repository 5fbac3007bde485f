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
  int batch_size = 4;
  int seq_len = 0;  // 0 = the model's max_seq_len
  int batches = 8;  // 0 = every full batch in the file
};
struct EvalResult {
  double loss = 0;     // mean next-token loss over batches x batch_size x seq_len targets
  int64_t batches = 0;
};

// Mean next-token loss of a model on a token file. Sequences are the chunks of T+1 tokens
// validation reads (chunk i = tokens [i*T, i*T + T]), in order from the start of the file:
// batch k holds chunks [k*B, (k+1)*B). No shuffling, so another implementation can recompute
// the number (test/python/check_export.py does). The forward loop is the trainer's
// validation loop (PipelineStage::run_forward). Prints what it evaluates. UserError naming
// the option for a bad checkpoint, token file or size.
EvalResult evaluate_model(const EvalRequest& r);

// Continues `prompt` (bytes, after an end-of-text as every document starts) with the model
// at `checkpoint`; on_text sees the decoded text of each new token as it comes. UserError
// naming --checkpoint or --prompt.
void sample_model(const std::string& checkpoint, const std::string& prompt, const SampleOptions& o,
                  const std::function<void(const std::string&)>& on_text);

}  // namespace holmes::tools
