// Hugging Face tokenizer.json (model type BPE, byte-level) and GPT-2's vocab.json + merges.txt
// (OpenAI's encoder.json + vocab.bpe). Both spell tokens in the byte-level alphabet
// (byte_level.hpp); a merge "a b" joins the tokens a and b into the token "ab".
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <unordered_map>

#include "common/errors.hpp"
#include "engine/tokenizer/byte_level.hpp"
#include "engine/tokenizer/file_text.hpp"
#include "engine/tokenizer/hf_common.hpp"
#include "engine/tokenizer/load.hpp"

namespace holmes::tokenizer {

using Json = nlohmann::json;

namespace hf {

void add_vocab(const Json& vocab, const std::string& path, const std::vector<std::string>& added_text, BpeSpec* spec) {
  if (!vocab.is_object()) throw UserError(fmt::format("{}: the vocabulary is not a JSON object of token -> id", path));
  for (const auto& [text, id] : vocab.items()) {
    if (!id.is_number_unsigned() || id.get<uint64_t>() >= kNoToken)
      throw UserError(fmt::format("{}: vocabulary entry '{}' has id {}; expected an id >= 0", path, text, id.dump()));
    const auto bytes = bytes_from_byte_level(text);
    if (!bytes) {
      if (std::find(added_text.begin(), added_text.end(), text) != added_text.end()) continue;
      throw UserError(fmt::format("{}: vocabulary entry '{}' (id {}) is not spelled in GPT-2's byte-level alphabet; "
                                  "accepted: byte-level BPE vocabularies (GPT-2, Llama 3, Qwen2 style)", path, text,
                                  id.dump()));
    }
    try {
      spec->model.tokens.add(*bytes, id.get<uint32_t>());
    } catch (const std::invalid_argument& e) {
      throw UserError(fmt::format("{}: vocabulary entry '{}': {}", path, text, e.what()));
    }
  }
}

void add_merge(const std::string& left, const std::string& right, const std::string& where, BpeSpec* spec) {
  const TokenTable& t = spec->model.tokens;
  const auto a = bytes_from_byte_level(left), b = bytes_from_byte_level(right);
  const uint32_t ia = a ? t.find(*a) : kNoToken, ib = b ? t.find(*b) : kNoToken;
  const uint32_t merged = a && b ? t.find(*a + *b) : kNoToken;
  if (ia == kNoToken || ib == kNoToken || merged == kNoToken)
    throw UserError(fmt::format("{}: merge '{} {}' does not match the vocabulary: '{}' is not a token; are the merges "
                                "and the vocabulary from the same tokenizer?", where, left, right,
                                ia == kNoToken ? left : ib == kNoToken ? right : left + right));
  const uint32_t rank = static_cast<uint32_t>(spec->merges.size());
  spec->model.pairs.add(ia, ib, rank, merged);
  spec->merges.emplace_back(ia, ib);
}

void add_merges_json(const nlohmann::json& merges, const std::string& path, BpeSpec* spec) {
  size_t i = 0;
  for (const nlohmann::json& m : merges) {
    ++i;
    const std::string where = fmt::format("{}: model.merges[{}]", path, i - 1);
    if (m.is_string()) {
      const std::string line = m.get<std::string>();
      const size_t space = line.find(' ');
      if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos)
        throw UserError(fmt::format("{}: malformed merge '{}'; expected two tokens separated by one space", where, line));
      add_merge(line.substr(0, space), line.substr(space + 1), where, spec);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      add_merge(m[0].get<std::string>(), m[1].get<std::string>(), where, spec);
    } else {
      throw UserError(fmt::format("{}: malformed merge {}; expected \"a b\" or [\"a\", \"b\"]", where,
                                  m.dump().substr(0, 80)));
    }
  }
}

}  // namespace hf

namespace {

Json parse_json(const std::string& path, const std::string& what) {
  const std::string text = read_file_text(path, what);
  try {
    return Json::parse(text);
  } catch (const Json::exception& e) {
    throw UserError(fmt::format("{}: malformed {} (not valid JSON: {})", path, what, e.what()));
  }
}

void add_merges_text(const std::string& text, const std::string& path, BpeSpec* spec) {
  size_t line_no = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (line_no == 1 && line.starts_with("#version"))) continue;
    const size_t space = line.find(' ');
    if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos)
      throw UserError(fmt::format("{}:{}: malformed merge line '{}'; expected two tokens separated by one space", path,
                                  line_no, line.substr(0, 80)));
    hf::add_merge(line.substr(0, space), line.substr(space + 1), fmt::format("{}:{}", path, line_no), spec);
  }
}

// The GPT-2 files: "<|endoftext|>" (in the vocabulary) is the special and document token.
void add_gpt2_special(const std::string& vocab_path, BpeSpec* spec) {
  const uint32_t eot = spec->model.tokens.find("<|endoftext|>");
  if (eot == kNoToken)
    throw UserError(fmt::format("{}: has no '<|endoftext|>' token, which GPT-2's files have; give a tokenizer.json to "
                                "name the special tokens", vocab_path));
  spec->specials.push_back({"<|endoftext|>", eot});
  spec->document_token = eot;
}

}  // namespace

BpeSpec read_gpt2_files(const std::string& vocab_path, const std::string& merges_path) {
  BpeSpec spec;
  spec.name = "GPT-2 vocab " + vocab_path;
  spec.pattern = kGpt2Pattern;
  hf::add_vocab(parse_json(vocab_path, "GPT-2 vocabulary (vocab.json / encoder.json)"), vocab_path, {}, &spec);
  add_merges_text(read_file_text(merges_path, "GPT-2 merges file (merges.txt / vocab.bpe)"), merges_path, &spec);
  add_gpt2_special(vocab_path, &spec);
  return spec;
}

BpeSpec read_gpt2_as_tiktoken(const std::string& vocab_path, const std::string& merges_path) {
  BpeSpec spec = read_gpt2_files(vocab_path, merges_path);
  // tiktoken's gpt2: the 256 bytes rank first (in the byte-level order), then merge i makes
  // token 256 + i; its ranks are the ids of encoder.json. Check that, then use its rules.
  const TokenTable& t = spec.model.tokens;
  for (int i = 0; i < 256; ++i) {
    const char b = static_cast<char>(byte_level_order(i));
    if (t.find(std::string_view(&b, 1)) != static_cast<uint32_t>(i))
      throw UserError(fmt::format("{}: byte 0x{:02x} is not token {}, as GPT-2's encoder.json has it", vocab_path,
                                  static_cast<unsigned char>(b), i));
  }
  for (size_t i = 0; i < spec.merges.size(); ++i)
    if (spec.model.pairs.find(spec.merges[i].first, spec.merges[i].second).id != 256 + i)
      throw UserError(fmt::format("{}: merge {} does not make token {} as GPT-2's vocab.bpe does with encoder.json",
                                  merges_path, i + 1, 256 + i));
  const BuiltinEncoding& gpt2 = *find_builtin("gpt2");
  BpeSpec out;
  out.name = "gpt2";
  out.pattern = gpt2.pattern;
  out.specials = gpt2.specials;
  out.document_token = spec.document_token;
  out.model.whole_piece_first = true;
  for (uint32_t id = 0; id < t.id_limit(); ++id)
    if (t.has(id) && id != spec.document_token) out.model.tokens.add(t.bytes(id), id);
  out.model.add_rank_merges();
  return out;
}

}  // namespace holmes::tokenizer
