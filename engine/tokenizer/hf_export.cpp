#include "engine/tokenizer/hf_export.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <tuple>

#include "engine/tokenizer/byte_level.hpp"

namespace holmes::tokenizer {

namespace {

using Json = nlohmann::ordered_json;

// The merges of a rank vocabulary, in the order that reproduces the ranks.
std::vector<std::pair<uint32_t, uint32_t>> merges_from_ranks(const TokenTable& t) {
  std::vector<std::tuple<uint32_t, uint32_t, uint32_t>> m;  // (merged rank, left, right)
  for (uint32_t id = 0; id < t.id_limit(); ++id) {
    const std::string_view bytes = t.bytes(id);
    for (size_t cut = 1; cut < bytes.size(); ++cut) {
      const uint32_t a = t.find(bytes.substr(0, cut)), b = t.find(bytes.substr(cut));
      if (a != kNoToken && b != kNoToken && a < id && b < id) m.emplace_back(id, a, b);
    }
  }
  std::sort(m.begin(), m.end());
  std::vector<std::pair<uint32_t, uint32_t>> out;
  for (const auto& [id, a, b] : m) out.emplace_back(a, b);
  return out;
}

bool ends_documents(const std::string& text) {
  return text == "<|endoftext|>" || text == "<|end_of_text|>" || text == "</s>" || text == "<|im_end|>";
}

}  // namespace

std::string hf_tokenizer_json(const BpeTokenizer& t) {
  const BpeSpec& s = t.spec();
  const TokenTable& tokens = s.model.tokens;
  Json vocab = Json::object();
  for (uint32_t id = 0; id < tokens.id_limit(); ++id)
    if (tokens.has(id)) vocab[byte_level_from_bytes(tokens.bytes(id))] = id;
  Json merges = Json::array();
  for (const auto& [a, b] : s.merges.empty() ? merges_from_ranks(tokens) : s.merges)
    merges.push_back(Json::array({byte_level_from_bytes(tokens.bytes(a)), byte_level_from_bytes(tokens.bytes(b))}));
  Json added = Json::array();
  for (const auto* list : {&s.specials, &s.added})
    for (const auto& sp : *list)
      added.push_back({{"id", sp.id}, {"content", sp.text}, {"single_word", false}, {"lstrip", false},
                       {"rstrip", false}, {"normalized", false}, {"special", list == &s.specials}});
  const Json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true},
                           {"use_regex", false}};
  Json post = nullptr;
  const std::string doc = t.token_text(s.document_token);
  if (!ends_documents(doc))
    post = {{"type", "TemplateProcessing"},
            {"single", Json::array({{{"SpecialToken", {{"id", doc}, {"type_id", 0}}}},
                                    {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
            {"pair", Json::array({{{"SpecialToken", {{"id", doc}, {"type_id", 0}}}},
                                  {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                                  {{"SpecialToken", {{"id", doc}, {"type_id", 1}}}},
                                  {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}})},
            {"special_tokens", {{doc, {{"id", doc}, {"ids", Json::array({s.document_token})}, {"tokens",
                                                                                              Json::array({doc})}}}}}};
  const Json root = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers", Json::array({{{"type", "Split"}, {"pattern", {{"Regex", s.pattern}}},
                                        {"behavior", "Isolated"}, {"invert", false}},
                                       byte_level})}}},
      {"post_processor", post},
      {"decoder", byte_level},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"byte_fallback", false},
        {"ignore_merges", s.model.whole_piece_first}, {"vocab", vocab}, {"merges", merges}}},
  };
  return root.dump() + "\n";
}

}  // namespace holmes::tokenizer
