#include "model/gpt_config.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "common/errors.hpp"
#include "model/architecture.hpp"

namespace holmes::model {

void require_config(bool ok, const std::string& field, long value, const std::string& accepted) {
  if (!ok) {
    throw UserError(fmt::format("model config: {} = {} is invalid; expected {}", field, value, accepted));
  }
}

int GptConfig::pad_vocab(int vocab, int tp) {
  const int multiple = std::max(128, 64 * std::max(tp, 1));
  return (vocab + multiple - 1) / multiple * multiple;
}

const Architecture& GptConfig::architecture() const { return model::architecture(arch); }

bool GptConfig::reads(unsigned option) const { return (architecture().options() & option) != 0; }

void GptConfig::finalize() {
  const Architecture& a = architecture();
  require_config(layers >= 1, "layers", layers, "at least 1");
  require_config(hidden >= 1, "hidden", hidden, "at least 1");
  require_config(heads >= 1 && hidden % heads == 0, "heads", heads,
                 fmt::format("a positive divisor of hidden ({})", hidden));
  require_config(vocab >= 2, "vocab", vocab, "at least 2");
  require_config(max_seq_len >= 1, "max_seq_len", max_seq_len, "at least 1");
  require_config(tp_size >= 1 && heads % tp_size == 0, "tp_size", tp_size,
                 fmt::format("a positive divisor of heads ({})", heads));
  require_config(tp_rank >= 0 && tp_rank < tp_size, "tp_rank", tp_rank,
                 fmt::format("0 <= tp_rank < tp_size ({})", tp_size));
  a.finalize(*this);
  if (padded_vocab == 0) padded_vocab = pad_vocab(vocab, tp_size);
  require_config(padded_vocab >= vocab && padded_vocab % tp_size == 0, "padded_vocab", padded_vocab,
                 fmt::format(">= vocab ({}) and a multiple of tp_size ({})", vocab, tp_size));
  require_config(first_layer >= 0 && first_layer <= layers, "first_layer", first_layer, fmt::format("0..{}", layers));
  if (stage_layers < 0) stage_layers = layers - first_layer;
  require_config(first_layer + stage_layers <= layers, "stage_layers", stage_layers,
                 fmt::format("at most layers - first_layer ({})", layers - first_layer));
  require_config(!has_embedding || first_layer == 0, "first_layer", first_layer,
                 "0 on the stage that holds the embedding");
  require_config(!has_head || first_layer + stage_layers == layers, "stage_layers", stage_layers,
                 fmt::format("{} (up to the last layer) on the stage that holds the head", layers - first_layer));
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
  cmp("arch", arch, job.arch);
  cmp("layers", layers, job.layers);
  cmp("hidden", hidden, job.hidden);
  cmp("heads", heads, job.heads);
  cmp("vocab_size", vocab, job.vocab);
  cmp("max_seq_len", max_seq_len, job.max_seq_len);
  if (arch == job.arch) {  // the options this architecture reads
    if (reads(kKvHeads)) cmp("kv_heads", kv_heads, job.kv_heads);
    if (reads(kFfnHidden)) cmp("ffn_hidden", ffn_hidden, job.ffn_hidden);
    if (reads(kRopeTheta)) cmp("rope_theta", rope_theta, job.rope_theta);
    if (reads(kNormEps)) cmp("norm_eps", norm_eps, job.norm_eps);
    if (reads(kTieEmbeddings)) cmp("tie_embeddings", tie_embeddings, job.tie_embeddings);
  }
  return fmt::format("{}", fmt::join(d, ", "));
}

std::string GptConfig::describe() const { return architecture().describe(*this); }

std::string GptConfig::to_string() const {
  // The options the architecture reads, after the heads.
  std::string options;
  if (reads(kKvHeads)) options += fmt::format(" KVH={}", kv_heads);
  if (reads(kFfnHidden)) options += fmt::format(" F={}", ffn_hidden);
  if (reads(kRopeTheta)) options += fmt::format(" theta={}", rope_theta);
  if (reads(kNormEps)) options += fmt::format(" eps={}", norm_eps);
  if (reads(kTieEmbeddings) && tie_embeddings) options += " tied";
  return fmt::format("{} L={} C={} NH={}{} V={} Vp={} T<={} tp={}/{} layers [{}, {}){}{}", architecture().label(),
                     layers, hidden, heads, options, vocab, padded_vocab, max_seq_len, tp_rank, tp_size, first_layer,
                     first_layer + num_stage_layers(), has_embedding ? " +embedding" : "", has_head ? " +head" : "");
}

}  // namespace holmes::model
