#include "engine/tools/model_tools.hpp"

#include <fmt/format.h>

#include <optional>
#include <vector>

#include "common/errors.hpp"
#include "engine/data/batches.hpp"
#include "engine/parallel/pipeline_stage.hpp"
#include "engine/tools/export.hpp"
#include "engine/data/token_file.hpp"
#include "engine/tokenizer/file_text.hpp"
#include "engine/tools/model_tokenizer.hpp"
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

// The tokens eval reads: a token file (checked against the model's tokenizer when both are
// known) or a text file tokenized here.
struct EvalTokens {
  std::optional<data::TokenFile> file;
  std::vector<uint32_t> encoded;
  std::string what, option, kind;  // for the log line; for errors ("--tokens F"); "token" / "text"
  data::TokenSpan span() const { return file ? file->tokens() : data::TokenSpan(encoded); }
};

EvalTokens eval_tokens(const EvalRequest& a, const FullModel& m) {
  EvalTokens e;
  if (a.tokens.empty() == a.text.empty())
    throw UserError("eval: give exactly one of --tokens FILE (a token file) and --text FILE (a text file)");
  if (!a.text.empty()) {
    const ModelTokenizer mt = model_tokenizer(a.checkpoint, m, a.tokenizer, /*required=*/true);
    const std::string text = tokenizer::read_file_text(a.text, "text file to evaluate on (--text)");
    e.encoded = {mt.tokenizer->document_token()};
    mt.tokenizer->encoder(false)->encode(text, &e.encoded);
    e.what = fmt::format("{} (tokenized with {} from {})", a.text, mt.tokenizer->name(), mt.from);
    e.option = "--text " + a.text;
    e.kind = "text";
    return e;
  }
  e.file.emplace(data::TokenFile::open(a.tokens, data::parse_token_format(a.format, "--format"), m.config.vocab));
  e.what = a.tokens;
  e.option = "--tokens " + a.tokens;
  e.kind = "token";
  if (const auto& stamp = e.file->tokenizer()) {
    const ModelTokenizer mt = model_tokenizer(a.checkpoint, m, a.tokenizer, /*required=*/false);
    const uint64_t model_hash = m.tokenizer.hash ? m.tokenizer.hash : mt.tokenizer ? mt.tokenizer->hash() : 0;
    const std::string model_name = m.tokenizer.hash ? m.tokenizer.name : mt.tokenizer ? mt.tokenizer->name() : "";
    if (model_hash != 0 && model_hash != stamp->hash)
      throw UserError(fmt::format("--tokens {}: made with the tokenizer of hash {} ({} ids), but the model at {} was "
                                  "trained with {} (hash {}): its loss on these ids would mean nothing. Accepted: "
                                  "tokens made with the model's tokenizer (or --text FILE)", a.tokens,
                                  tokenizer::hash_hex(stamp->hash), stamp->ids, a.checkpoint, model_name,
                                  tokenizer::hash_hex(model_hash)));
  }
  return e;
}

}  // namespace

EvalResult evaluate_model(const EvalRequest& a) {
  const FullModel m = load_full_model(a.checkpoint);
  const model::GptConfig& c = m.config;
  const int T = a.seq_len > 0 ? a.seq_len : c.max_seq_len, B = a.batch_size;
  if (T > c.max_seq_len)
    throw UserError(fmt::format("--seq-len {}: longer than the model's {} positions (accepted: 1..{})", T,
                                c.max_seq_len, c.max_seq_len));
  const EvalTokens toks = eval_tokens(a, m);
  const data::TokenSpan tokens = toks.span();
  const data::BatchSampler sampler({tokens}, T, 0, /*shuffle=*/false);
  const int64_t available = sampler.chunk_count() / B;
  const int64_t batches = a.batches > 0 ? a.batches : available;
  if (available == 0)  // no --batches value fits: say what would make one batch
    throw UserError(fmt::format("{}: {} tokens = {} sequences of {}+1 tokens, fewer than one batch of "
                                "--batch-size {}; accepted: a longer {} file, {}a shorter --seq-len (now {})",
                                toks.option, tokens.size(), sampler.chunk_count(), T, B, toks.kind,
                                sampler.chunk_count() > 0 ? fmt::format("--batch-size 1..{}, ", sampler.chunk_count())
                                                          : "",
                                T));
  if (batches > available)
    throw UserError(fmt::format("--batches {} x --batch-size {}: {} holds {} tokens = {} sequences of {}+1 tokens, "
                                "enough for {} batches (accepted: --batches 1..{}, or 0 for all)",
                                a.batches, B, toks.what, tokens.size(), sampler.chunk_count(), T, available,
                                available));
  LoadedModel lm(m, a.checkpoint, B, T);
  fmt::print("eval: model {} (L={} C={} NH={} V={})\n", m.source, c.layers, c.hidden, c.heads, c.vocab);
  fmt::print("eval: {} ({} tokens): {} batches x {} sequences of {}+1 tokens, in order from the start\n", toks.what,
             tokens.size(), batches, B, T);
  parallel::ParallelGroups alone;  // one stage, no groups
  parallel::PipelineStage stage(lm.gpt, alone, 1, B, T);
  const double sum = stage.run_forward(static_cast<int>(batches), [&](int k, int32_t* inputs, int32_t* targets, int32_t*) {
    for (int b = 0; b < B; ++b)
      sampler.fill_sequence(int64_t{k} * B + b, inputs + static_cast<size_t>(b) * T, targets + static_cast<size_t>(b) * T);
  });
  // Equal-sized batches: the mean of the batch means is the mean over all targets.
  return {.loss = sum / static_cast<double>(batches), .batches = batches};
}

void sample_model(const std::string& checkpoint, const std::string& prompt_text, const SampleOptions& options,
                  const std::function<void(const std::string&)>& on_text, const std::string& tokenizer_spec) {
  const FullModel m = load_full_model(checkpoint);
  const ModelTokenizer mt = model_tokenizer(checkpoint, m, tokenizer_spec, /*required=*/true);
  const tokenizer::Tokenizer& tok = *mt.tokenizer;
  LoadedModel lm(m, checkpoint, 1, m.config.max_seq_len);
  std::vector<uint32_t> ids = {tok.document_token()};  // a document starts with (after) it
  tok.encoder(false)->encode(prompt_text, &ids);
  std::vector<int> prompt(ids.begin(), ids.end());
  for (int t : prompt)
    if (t >= m.config.vocab)
      throw UserError(fmt::format("--prompt: token {} is outside the model's vocabulary of {}", t, m.config.vocab));
  SampleOptions o = options;
  o.stop_token = static_cast<int>(tok.document_token());
  // Decoded as a whole each time and printed from where the last print ended: SentencePiece
  // decodes a run of tokens differently from its tokens one by one (byte pieces, spaces).
  std::vector<uint32_t> out;
  size_t printed = 0;
  generate(lm.gpt, prompt, o, [&](int t) {
    out.push_back(static_cast<uint32_t>(t));
    const std::string text = tok.decode(out);
    if (text.size() > printed) {
      on_text(text.substr(printed));
      printed = text.size();
    }
  });
}

}  // namespace holmes::tools
