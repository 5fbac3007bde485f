// Loading tokenizer files: the formats agree with each other, and every bad file is a
// UserError naming the file and what is wrong.
#include <catch2/catch.hpp>

#include "common/errors.hpp"
#include "engine/tokenizer/load.hpp"
#include "tokenizer_test_util.hpp"

using namespace holmes::tokenizer;
namespace fs = std::filesystem;

namespace {

// The test vocabulary as a tokenizer.json equivalent to vocab.json + merges.txt.
void write_tokenizer_json(const test::TrainedBpe& v, const fs::path& path, const std::string& pre) {
  std::string vocab, merges;
  for (size_t id = 0; id < v.tokens.size(); ++id)
    vocab += fmt::format("{}{}: {}", id ? ", " : "", test::json_string(byte_level_from_bytes(v.tokens[id])), id);
  vocab += fmt::format(", \"<|endoftext|>\": {}", v.tokens.size());
  for (size_t i = 0; i < v.merges.size(); ++i)
    merges += fmt::format("{}{}", i ? ", " : "",
                          test::json_string(byte_level_from_bytes(v.merges[i].first) + " " +
                                            byte_level_from_bytes(v.merges[i].second)));
  test::write_file(path, fmt::format(R"({{"added_tokens": [{{"id": {}, "content": "<|endoftext|>", "special": true}}],
    "normalizer": null, "pre_tokenizer": {}, "decoder": {{"type": "ByteLevel"}},
    "model": {{"type": "BPE", "dropout": null, "continuing_subword_prefix": "", "vocab": {{{}}}, "merges": [{}]}}}})",
                                     v.tokens.size(), pre, vocab, merges));
}

void tiktoken_file(const test::TrainedBpe& v, const fs::path& path, size_t count) {
  static const char* d = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t id = 0; id < count; ++id) {
    const std::string& t = v.tokens[id % v.tokens.size()] + (id >= v.tokens.size() ? std::to_string(id) : "");
    std::string b64;
    for (size_t i = 0; i < t.size(); i += 3) {
      uint32_t n = static_cast<unsigned char>(t[i]) << 16;
      if (i + 1 < t.size()) n |= static_cast<unsigned char>(t[i + 1]) << 8;
      if (i + 2 < t.size()) n |= static_cast<unsigned char>(t[i + 2]);
      b64 += d[(n >> 18) & 63];
      b64 += d[(n >> 12) & 63];
      b64 += i + 1 < t.size() ? d[(n >> 6) & 63] : '=';
      b64 += i + 2 < t.size() ? d[n & 63] : '=';
    }
    out += b64 + " " + std::to_string(id) + "\n";
  }
  test::write_file(path, out);
}

const std::string kByteLevelPre = R"({"type": "ByteLevel", "add_prefix_space": false, "use_regex": true})";

}  // namespace

TEST_CASE("vocab.json + merges.txt and the same tokenizer.json load alike") {
  const auto v = test::train_bpe(test::test_text(), 150);
  const fs::path dir = test::temp_dir("formats");
  test::write_gpt2_files(v, dir);
  write_tokenizer_json(v, dir / "tokenizer.json", kByteLevelPre);
  const auto files = load_tokenizer((dir / "vocab.json").string());
  const auto json = load_tokenizer((dir / "tokenizer.json").string());
  const auto folder = load_tokenizer(dir.string());  // tokenizer.json first
  CHECK(files->hash() == json->hash());
  CHECK(folder->hash() == json->hash());
  const std::string text = test::test_text().substr(0, 3000) + " <|endoftext|> naïve\n\n";
  CHECK(files->encode(text) == json->encode(text));
  CHECK(json->decode(json->encode(text)) == text);
  CHECK(json->document_token() == v.tokens.size());
  CHECK(json->encode(" the cat").size() < 8);  // merges apply
}

TEST_CASE("a Split + ByteLevel Sequence pre-tokenizer reads its regex") {
  const auto v = test::train_bpe(test::test_text(), 20);
  const fs::path dir = test::temp_dir("sequence");
  write_tokenizer_json(v, dir / "tokenizer.json",
                       R"({"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "."},
                           "behavior": "Isolated", "invert": false}, {"type": "ByteLevel", "use_regex": false}]})");
  const auto t = load_tokenizer((dir / "tokenizer.json").string());
  // One piece per character: no merge can apply.
  CHECK(t->encode(" the ka").size() == 7);
  CHECK(load_tokenizer((dir / "tokenizer.json").string())->hash() != 0);
}

TEST_CASE("bad tokenizer files: exit-2 errors naming the file and the problem") {
  const auto v = test::train_bpe(test::test_text(), 30);
  const fs::path dir = test::temp_dir("bad");
  const auto fails = [](const std::string& spec, const std::string& a, const std::string& b) {
    INFO(spec);
    REQUIRE_THROWS_MATCHES(load_tokenizer(spec), holmes::UserError,
                           Catch::Matchers::Predicate<holmes::UserError>(
                               [&](const holmes::UserError& e) {
                                 const std::string m = e.what();
                                 return m.find(a) != std::string::npos && m.find(b) != std::string::npos;
                               },
                               "message names " + a + " and " + b));
  };
  fails((dir / "missing.json").string(), "missing.json", "no such file");
  fails("cl100k_base", "cl100k_base:PATH", "ships no vocabulary");
  fails("cl100k_base:" + (dir / "nope.tiktoken").string(), "nope.tiktoken", "do not exist");
  test::write_file(dir / "broken.json", "{\"model\": {\"type\": \"BPE\", ");
  fails((dir / "broken.json").string(), "broken.json", "not valid JSON");
  test::write_file(dir / "wordpiece.json", R"({"model": {"type": "WordPiece", "vocab": {}}})");
  fails((dir / "wordpiece.json").string(), "wordpiece.json", "WordPiece");
  fs::create_directories(dir / "mismatch");
  test::write_gpt2_files(v, dir / "mismatch");
  std::string merges = "#version: 0.2\n";
  for (int i = 0; i < 5; ++i)
    merges += byte_level_from_bytes(v.merges[i].first) + " " + byte_level_from_bytes(v.merges[i].second) + "\n";
  test::write_file(dir / "mismatch" / "merges.txt", merges + "q z\n");
  fails((dir / "mismatch" / "vocab.json").string(), "merges.txt:7", "'qz' is not a token");
  fs::create_directories(dir / "nomerges");
  test::write_gpt2_files(v, dir / "nomerges");
  fs::remove(dir / "nomerges" / "merges.txt");
  fails((dir / "nomerges" / "vocab.json").string(), "merges.txt", "does not exist");
  test::write_file(dir / "r50k_base.tiktoken", "IQ== 0\nnot base64! 1\n");
  fails((dir / "r50k_base.tiktoken").string(), "r50k_base.tiktoken:2", "malformed tiktoken rank line");
  tiktoken_file(v, dir / "cl100k_base.tiktoken", 300);
  fails((dir / "cl100k_base.tiktoken").string(), "cl100k_base.tiktoken", "holds 300 ranks");
  tiktoken_file(v, dir / "mine.tiktoken", 300);
  fails((dir / "mine.tiktoken").string(), "mine.tiktoken", "name the encoding");
  fs::create_directories(dir / "empty");
  fails((dir / "empty").string(), "empty", "holds no tokenizer.json");
  test::write_file(dir / "tokenizer.model", "this is not a SentencePiece model");
  fails((dir / "tokenizer.model").string(), "tokenizer.model", "SentencePiece");
  write_tokenizer_json(v, dir / "prefix.json", R"({"type": "ByteLevel", "add_prefix_space": true})");
  fails((dir / "prefix.json").string(), "prefix.json", "add_prefix_space");
}

TEST_CASE("a tiktoken rank file of the right size loads under its built-in name") {
  const auto v = test::train_bpe(test::test_text(), 30);
  const fs::path dir = test::temp_dir("ranks");
  tiktoken_file(v, dir / "r50k_base.tiktoken", 50256);
  const auto t = load_tokenizer((dir / "r50k_base.tiktoken").string());
  CHECK(t->name() == "r50k_base");
  CHECK(t->id_count() == 50257);
  CHECK(t->document_token() == 50256);
  const std::string text = " the cat sat on the mat";
  CHECK(t->decode(t->encode(text)) == text);
  CHECK(load_tokenizer("r50k_base:" + (dir / "r50k_base.tiktoken").string())->hash() == t->hash());
  CHECK(load_tokenizer("bytes")->encode("ab") == std::vector<uint32_t>{'a', 'b'});
}
