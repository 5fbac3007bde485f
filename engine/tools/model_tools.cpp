#include "engine/tools/model_tools.hpp"

#include <fmt/format.h>

#include <vector>

#include "engine/spec/errors.hpp"
#include "engine/data/batches.hpp"
#include "engine/parallel/pipeline_stage.hpp"
#include "engine/tools/export.hpp"
#include "engine/data/token_file.hpp"
#include "engine/data/tokenizer.hpp"
#include "backends/backends.hpp"

namespace holmes::tools {

namespace {

// The model on the CPU backend with its weights loaded.
struct LoadedModel {
  model::Backend backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  model::Gpt gpt;
  LoadedModel(const FullModel& m, const std::string& path, int B, int T) : gpt(m.config, backend, B, T) {
    if (gpt.num_params() != m.params.size())
      throw UserError(fmt::format("--checkpoint {}: {} parameters in the file, the model it describes has {}", path,
                                  m.params.size(), gpt.num_params()));
    gpt.load_params(m.params);
  }
};

}  // namespace

EvalResult evaluate_model(const EvalRequest& a) {
  const FullModel m = load_full_model(a.checkpoint);
  const model::GptConfig& c = m.config;
  const int T = a.seq_len > 0 ? a.seq_len : c.max_seq_len, B = a.batch_size;
  if (T > c.max_seq_len)
    throw UserError(fmt::format("--seq-len {}: longer than the model's {} positions (accepted: 1..{})", T,
                                c.max_seq_len, c.max_seq_len));
  const auto file = data::TokenFile::open(a.tokens, data::parse_token_format(a.format, "--format"), c.vocab);
  const data::BatchSampler sampler({file.tokens()}, T, 0, /*shuffle=*/false);
  const int64_t available = sampler.chunk_count() / B;
  const int64_t batches = a.batches > 0 ? a.batches : available;
  if (available == 0)  // no --batches value fits: say what would make one batch
    throw UserError(fmt::format("--tokens {}: {} tokens = {} sequences of {}+1 tokens, fewer than one batch of "
                                "--batch-size {}; accepted: a longer token file, {}a shorter --seq-len (now {})",
                                a.tokens, file.tokens().size(), sampler.chunk_count(), T, B,
                                sampler.chunk_count() > 0 ? fmt::format("--batch-size 1..{}, ", sampler.chunk_count())
                                                          : "",
                                T));
  if (batches > available)
    throw UserError(fmt::format("--batches {} x --batch-size {}: {} holds {} tokens = {} sequences of {}+1 tokens, "
                                "enough for {} batches (accepted: --batches 1..{}, or 0 for all)",
                                a.batches, B, a.tokens, file.tokens().size(), sampler.chunk_count(), T, available,
                                available));
  LoadedModel lm(m, a.checkpoint, B, T);
  fmt::print("eval: model {} (L={} C={} NH={} V={})\n", m.source, c.layers, c.hidden, c.heads, c.vocab);
  fmt::print("eval: {} ({} tokens): {} batches x {} sequences of {}+1 tokens, in order from the start\n", a.tokens,
             file.tokens().size(), batches, B, T);
  parallel::CommClock clock;
  const parallel::ParallelContext whole;  // one stage, no groups
  parallel::PipelineStage stage(lm.gpt, whole, 1, B, T, clock);
  const double sum = stage.run_forward(static_cast<int>(batches), [&](int k, int32_t* inputs, int32_t* targets) {
    for (int b = 0; b < B; ++b)
      sampler.fill_sequence(int64_t{k} * B + b, inputs + static_cast<size_t>(b) * T, targets + static_cast<size_t>(b) * T);
  });
  // Equal-sized batches: the mean of the batch means is the mean over all targets.
  return {.loss = sum / static_cast<double>(batches), .batches = batches};
}

void sample_model(const std::string& checkpoint, const std::string& prompt_text, const SampleOptions& o,
                  const std::function<void(const std::string&)>& on_text) {
  const FullModel m = load_full_model(checkpoint);
  LoadedModel lm(m, checkpoint, 1, m.config.max_seq_len);
  std::vector<uint16_t> toks16 = {data::kEndOfText};  // a document starts after end-of-text
  data::encode_bytes(prompt_text, &toks16);
  std::vector<int> prompt(toks16.begin(), toks16.end());
  for (int t : prompt)
    if (t >= m.config.vocab)
      throw UserError(fmt::format("--prompt: byte {} is outside the model's vocabulary of {}", t, m.config.vocab));
  generate(lm.gpt, prompt, o, [&](int tok) {
    const int32_t t = tok;
    on_text(data::decode_bytes({&t, 1}));
  });
}

}  // namespace holmes::tools
