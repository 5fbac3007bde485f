#include "model/gpt_config.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "common/errors.hpp"

namespace holmes::model {

int GptConfig::pad_vocab(int vocab, int tp) {
  const int multiple = std::max(128, 64 * std::max(tp, 1));
  return (vocab + multiple - 1) / multiple * multiple;
}

namespace {

void require(bool ok, const std::string& field, long value, const std::string& accepted) {
  if (!ok) {
    throw UserError(fmt::format("model config: {} = {} is invalid; expected {}", field, value, accepted));
  }
}

}  // namespace

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

std::string GptConfig::to_string() const {
  return fmt::format("GPT L={} C={} NH={} V={} Vp={} T<={} tp={}/{} layers [{}, {}){}{}", layers,
                     hidden, heads, vocab, padded_vocab, max_seq_len, tp_rank, tp_size, first_layer,
                     first_layer + num_stage_layers(), has_embedding ? " +embedding" : "",
                     has_head ? " +head" : "");
}

}  // namespace holmes::model
