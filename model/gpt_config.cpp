#include "model/gpt_config.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "common/errors.hpp"

namespace holmes::model {

const char* arch_name(Arch a) { return a == Arch::kLlama ? "llama" : "gpt2"; }

Arch parse_arch(const std::string& name) {
  if (name == "gpt2") return Arch::kGpt2;
  if (name == "llama") return Arch::kLlama;
  throw UserError(fmt::format("model architecture '{}' is not known; accepted: gpt2, llama", name));
}

int GptConfig::pad_vocab(int vocab, int tp) {
  const int multiple = std::max(128, 64 * std::max(tp, 1));
  return (vocab + multiple - 1) / multiple * multiple;
}

int GptConfig::default_ffn_hidden(int hidden, int multiple) {
  const int64_t f = (int64_t{2} * 4 * hidden + 2) / 3;  // ceil(2/3 * 4C)
  const int64_t m = std::max(multiple, 1);
  return static_cast<int>((f + m - 1) / m * m);
}

namespace {

void require(bool ok, const std::string& field, long value, const std::string& accepted) {
  if (!ok) {
    throw UserError(fmt::format("model config: {} = {} is invalid; expected {}", field, value, accepted));
  }
}

}  // namespace

void GptConfig::finalize_arch() {
  if (kv_heads == 0) kv_heads = heads;
  if (ffn_hidden == 0) ffn_hidden = is_llama() ? default_ffn_hidden(hidden, ffn_multiple) : 4 * hidden;
  if (!is_llama()) {
    // GPT-2's fixed choices: anything else is a configuration the kernels do not run.
    require(kv_heads == heads, "kv_heads", kv_heads, fmt::format("heads ({}) for gpt2", heads));
    require(ffn_hidden == 4 * hidden, "ffn_hidden", ffn_hidden, fmt::format("4 * hidden ({}) for gpt2", 4 * hidden));
    require(tie_embeddings, "tie_embeddings", 0, "true for gpt2 (its LM head is the token embedding)");
    require(norm_eps == 1e-5f, "norm_eps (x1e6)", std::lround(norm_eps * 1e6), "10 (1e-5) for gpt2");
    return;
  }
  require(kv_heads >= 1 && heads % kv_heads == 0, "kv_heads", kv_heads,
          fmt::format("a positive divisor of heads ({})", heads));
  require(head_size() % 2 == 0, "hidden / heads", head_size(), "an even head size (rotary embeddings turn pairs)");
  require(kv_heads % tp_size == 0, "tp_size", tp_size,
          fmt::format("a divisor of kv_heads ({}) (each tensor-parallel rank holds whole key/value heads)", kv_heads));
  require(ffn_hidden >= 1 && ffn_hidden % tp_size == 0, "ffn_hidden", ffn_hidden,
          fmt::format("a positive multiple of tp_size ({})", tp_size));
  require(rope_theta > 0, "rope_theta", std::lround(rope_theta), "> 0");
  require(norm_eps > 0, "norm_eps (x1e9)", std::lround(norm_eps * 1e9), "> 0");
}

void GptConfig::finalize() {
  require(layers >= 1, "layers", layers, "at least 1");
  require(hidden >= 1, "hidden", hidden, "at least 1");
  require(heads >= 1 && hidden % heads == 0, "heads", heads,
          fmt::format("a positive divisor of hidden ({})", hidden));
  require(vocab >= 2, "vocab", vocab, "at least 2");
  require(max_seq_len >= 1, "max_seq_len", max_seq_len, "at least 1");
  require(tp_size >= 1 && heads % tp_size == 0, "tp_size", tp_size,
          fmt::format("a positive divisor of heads ({})", heads));
  require(tp_rank >= 0 && tp_rank < tp_size, "tp_rank", tp_rank,
          fmt::format("0 <= tp_rank < tp_size ({})", tp_size));
  finalize_arch();
  if (padded_vocab == 0) padded_vocab = pad_vocab(vocab, tp_size);
  require(padded_vocab >= vocab && padded_vocab % tp_size == 0, "padded_vocab", padded_vocab,
          fmt::format(">= vocab ({}) and a multiple of tp_size ({})", vocab, tp_size));
  require(first_layer >= 0 && first_layer <= layers, "first_layer", first_layer,
          fmt::format("0..{}", layers));
  if (stage_layers < 0) stage_layers = layers - first_layer;
  require(first_layer + stage_layers <= layers, "stage_layers", stage_layers,
          fmt::format("at most layers - first_layer ({})", layers - first_layer));
  require(!has_embedding || first_layer == 0, "first_layer", first_layer,
          "0 on the stage that holds the embedding");
  require(!has_head || first_layer + stage_layers == layers, "stage_layers", stage_layers,
          fmt::format("{} (up to the last layer) on the stage that holds the head",
                      layers - first_layer));
}

GptConfig GptConfig::gpt2(int layers, int hidden, int heads, int vocab, int max_seq_len) {
  GptConfig c;
  c.layers = layers;
  c.hidden = hidden;
  c.heads = heads;
  c.vocab = vocab;
  c.max_seq_len = max_seq_len;
  c.finalize();
  return c;
}

GptConfig GptConfig::llama(int layers, int hidden, int heads, int kv_heads, int ffn_hidden, int vocab,
                           int max_seq_len) {
  GptConfig c;
  c.arch = Arch::kLlama;
  c.layers = layers;
  c.hidden = hidden;
  c.heads = heads;
  c.kv_heads = kv_heads;
  c.ffn_hidden = ffn_hidden;
  c.vocab = vocab;
  c.max_seq_len = max_seq_len;
  c.tie_embeddings = false;
  c.finalize();
  return c;
}

GptConfig GptConfig::shard(int tp, int rank, int first, int count) const {
  GptConfig c = *this;
  c.tp_size = tp;
  c.tp_rank = rank;
  c.padded_vocab = 0;
  c.first_layer = first;
  c.stage_layers = count < 0 ? layers - first : count;
  c.has_embedding = first == 0;
  c.has_head = c.first_layer + c.stage_layers == layers;
  c.finalize();
  return c;
}

GptConfig GptConfig::global() const {
  GptConfig c = *this;
  c.tp_size = 1;
  c.tp_rank = 0;
  c.first_layer = 0;
  c.stage_layers = -1;
  c.has_embedding = c.has_head = true;
  c.finalize();
  return c;
}

std::string GptConfig::differences(const GptConfig& job) const {
  std::vector<std::string> d;
  auto cmp = [&](const char* key, const auto& saved, const auto& want) {
    if (saved != want) d.push_back(fmt::format("model.{} {} (this job: {})", key, saved, want));
  };
  cmp("arch", std::string(arch_name(arch)), std::string(arch_name(job.arch)));
  cmp("layers", layers, job.layers);
  cmp("hidden", hidden, job.hidden);
  cmp("heads", heads, job.heads);
  cmp("vocab_size", vocab, job.vocab);
  cmp("max_seq_len", max_seq_len, job.max_seq_len);
  if (is_llama() && job.is_llama()) {
    cmp("kv_heads", kv_heads, job.kv_heads);
    cmp("ffn_hidden", ffn_hidden, job.ffn_hidden);
    cmp("rope_theta", rope_theta, job.rope_theta);
    cmp("norm_eps", norm_eps, job.norm_eps);
    cmp("tie_embeddings", tie_embeddings, job.tie_embeddings);
  }
  return fmt::format("{}", fmt::join(d, ", "));
}

std::string GptConfig::describe() const {
  if (!is_llama())
    return fmt::format("GPT-2 L={} C={} NH={} V={} (padded {})", layers, hidden, heads, vocab, padded_vocab);
  return fmt::format("Llama L={} C={} NH={} KVH={} F={} V={} (padded {}), rope_theta {}, {} head", layers, hidden,
                     heads, kv_heads, ffn_hidden, vocab, padded_vocab, rope_theta,
                     tie_embeddings ? "tied" : "untied");
}

std::string GptConfig::to_string() const {
  const std::string llama_part =
      is_llama() ? fmt::format(" KVH={} F={} theta={} eps={}{}", kv_heads, ffn_hidden, rope_theta, norm_eps,
                               tie_embeddings ? " tied" : "")
                 : "";
  return fmt::format("{} L={} C={} NH={}{} V={} Vp={} T<={} tp={}/{} layers [{}, {}){}{}",
                     is_llama() ? "Llama" : "GPT", layers, hidden, heads, llama_part, vocab, padded_vocab,
                     max_seq_len, tp_rank, tp_size, first_layer,
                     first_layer + num_stage_layers(), has_embedding ? " +embedding" : "",
                     has_head ? " +head" : "");
}

}  // namespace holmes::model
