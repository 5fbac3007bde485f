// Hugging Face tokenizer.json with a byte-level BPE model: what is read and what is refused.
//   model: type BPE; vocab; merges ("a b" strings or [a, b] pairs); ignore_merges. Refused:
//     dropout, continuing_subword_prefix, end_of_word_suffix (not byte-level BPE).
//   normalizer: none (an NFC/NFKC/Lowercase normalizer is refused: not implemented).
//   pre_tokenizer: ByteLevel (use_regex: GPT-2's pattern), or a Sequence of Split
//     (Regex or String pattern, behavior Isolated, not inverted) and ByteLevel without
//     regex. add_prefix_space must be false.
//   added_tokens: special ones are produced only with allow_special; the others always.
//   The document token: the first token of post_processor's TemplateProcessing "single"
//     template when it is a special token (Llama 3's <|begin_of_text|>), else the first of
//     <|endoftext|>, <|end_of_text|>, </s>, <|im_end|> among the special tokens.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "common/errors.hpp"
#include "engine/tokenizer/byte_level.hpp"
#include "engine/tokenizer/file_text.hpp"
#include "engine/tokenizer/hf_common.hpp"
#include "engine/tokenizer/load.hpp"

namespace holmes::tokenizer {

namespace {

using Json = nlohmann::json;

bool unset(const Json& j, const char* key) {
  return !j.contains(key) || j[key].is_null() || (j[key].is_string() && j[key].get<std::string>().empty());
}

std::string type_of(const Json& j) { return j.is_object() && j.contains("type") ? j["type"].dump() : j.dump(); }

// The split pattern of a pre_tokenizer, or UserError saying which part is not supported.
std::string split_pattern(const Json& pre, const std::string& path) {
  const auto refuse = [&](const std::string& what) {
    return UserError(fmt::format("{}: pre_tokenizer {} is not supported; accepted: ByteLevel, or a Sequence of Split "
                                 "(behavior Isolated) and ByteLevel with use_regex false, all with add_prefix_space "
                                 "false", path, what));
  };
  if (!pre.is_object()) throw refuse("missing (null)");
  const auto byte_level_ok = [&](const Json& b) {
    if (b.value("add_prefix_space", false)) throw refuse("ByteLevel with add_prefix_space true");
  };
  const std::string type = pre.value("type", "");
  if (type == "ByteLevel") {
    byte_level_ok(pre);
    if (!pre.value("use_regex", true)) throw refuse("ByteLevel with use_regex false and no Split");
    return kGpt2Pattern;
  }
  if (type != "Sequence" || !pre.contains("pretokenizers") || !pre["pretokenizers"].is_array()) throw refuse(type_of(pre));
  std::string pattern;
  bool byte_level = false;
  for (const Json& p : pre["pretokenizers"]) {
    const std::string t = p.value("type", "");
    if (t == "ByteLevel") {
      byte_level_ok(p);
      if (p.value("use_regex", true)) {
        if (!pattern.empty()) throw refuse("Split followed by ByteLevel with use_regex true");
        pattern = kGpt2Pattern;
      }
      byte_level = true;
    } else if (t == "Split" && pattern.empty() && !byte_level) {
      const Json& pat = p.contains("pattern") ? p["pattern"] : Json();
      if (p.value("behavior", "") != "Isolated" || p.value("invert", false)) throw refuse("Split with " + p.dump());
      if (pat.contains("Regex") && pat["Regex"].is_string())
        pattern = pat["Regex"].get<std::string>();
      else if (pat.contains("String") && pat["String"].is_string())
        pattern = "\\Q" + pat["String"].get<std::string>() + "\\E";
      else
        throw refuse("Split pattern " + pat.dump());
    } else {
      throw refuse(type_of(p) + " in the Sequence");
    }
  }
  if (!byte_level || pattern.empty()) throw refuse("Sequence without a Split and a ByteLevel");
  return pattern;
}

void read_added_tokens(const Json& root, const std::string& path, BpeSpec* spec) {
  if (!root.contains("added_tokens") || root["added_tokens"].is_null()) return;
  for (const Json& a : root["added_tokens"]) {
    if (!a.contains("id") || !a["id"].is_number_unsigned() || !a.contains("content") || !a["content"].is_string())
      throw UserError(fmt::format("{}: malformed added token {}; expected an object with id and content", path,
                                  a.dump().substr(0, 120)));
    SpecialToken t{a["content"].get<std::string>(), a["id"].get<uint32_t>()};
    if (a.value("special", false)) {
      spec->specials.push_back(std::move(t));
    } else {
      if (a.value("lstrip", false) || a.value("rstrip", false) || a.value("single_word", false))
        throw UserError(fmt::format("{}: added token '{}' uses lstrip/rstrip/single_word, which is not supported",
                                    path, t.text));
      spec->added.push_back(std::move(t));
    }
  }
}

uint32_t pick_document_token(const Json& root, const std::string& path, const BpeSpec& spec) {
  const auto special_id = [&](const std::string& text) -> uint32_t {
    for (const auto& s : spec.specials)
      if (s.text == text) return s.id;
    return kNoToken;
  };
  const Json& post = root.contains("post_processor") ? root["post_processor"] : Json();
  if (post.is_object() && post.value("type", "") == "TemplateProcessing" && post.contains("single") &&
      post["single"].is_array() && !post["single"].empty()) {
    const Json& first = post["single"][0];
    if (first.contains("SpecialToken") && first["SpecialToken"].contains("id")) {
      const uint32_t id = special_id(first["SpecialToken"]["id"].get<std::string>());
      if (id != kNoToken) return id;
    }
  }
  for (const char* name : {"<|endoftext|>", "<|end_of_text|>", "</s>", "<|im_end|>"})
    if (const uint32_t id = special_id(name); id != kNoToken) return id;
  throw UserError(fmt::format("{}: cannot tell which token separates documents: no TemplateProcessing post_processor "
                              "starting with a special token and none of <|endoftext|>, <|end_of_text|>, </s>, "
                              "<|im_end|> among the special added_tokens", path));
}

}  // namespace

BpeSpec read_hf_tokenizer_json(const std::string& path) {
  const std::string text = read_file_text(path, "Hugging Face tokenizer.json");
  Json root;
  try {
    root = Json::parse(text);
  } catch (const Json::exception& e) {
    throw UserError(fmt::format("{}: malformed tokenizer.json (not valid JSON: {})", path, e.what()));
  }
  if (!root.is_object() || !root.contains("model") || !root["model"].is_object())
    throw UserError(fmt::format("{}: not a Hugging Face tokenizer.json (no 'model' object)", path));
  const Json& model = root["model"];
  if (model.value("type", "BPE") != "BPE")
    throw UserError(fmt::format("{}: model type {} is not supported; accepted: BPE (byte-level). SentencePiece models: "
                                "give the tokenizer.model file", path, model["type"].dump()));
  for (const char* key : {"dropout", "continuing_subword_prefix", "end_of_word_suffix"})
    if (!unset(model, key))
      throw UserError(fmt::format("{}: model.{} = {} is not supported (byte-level BPE has none)", path, key,
                                  model[key].dump()));
  if (root.contains("normalizer") && !root["normalizer"].is_null())
    throw UserError(fmt::format("{}: normalizer {} is not supported; accepted: none (null)", path,
                                type_of(root["normalizer"])));
  BpeSpec spec;
  spec.name = "tokenizer.json " + path;
  spec.pattern = split_pattern(root.contains("pre_tokenizer") ? root["pre_tokenizer"] : Json(), path);
  spec.model.whole_piece_first = model.value("ignore_merges", false);
  read_added_tokens(root, path, &spec);
  std::vector<std::string> added_text;
  for (const auto* list : {&spec.specials, &spec.added})
    for (const auto& s : *list) added_text.push_back(s.text);
  if (!model.contains("vocab") || !model.contains("merges") || !model["merges"].is_array())
    throw UserError(fmt::format("{}: model has no vocab or no merges list", path));
  const Json& vocab = model["vocab"];
  if (!vocab.is_object()) throw UserError(fmt::format("{}: model.vocab is not a JSON object", path));
  hf::add_vocab(vocab, path, added_text, &spec);
  hf::add_merges_json(model["merges"], path, &spec);
  spec.document_token = pick_document_token(root, path, spec);
  return spec;
}

}  // namespace holmes::tokenizer
