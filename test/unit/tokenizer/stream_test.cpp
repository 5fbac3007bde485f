// The parallel streaming encoder gives exactly the tokens of one whole-text encode, for any
// window size and thread count (stitches at chunk cuts, carries at window ends), and special
// tokens appear only when allowed.
#include <catch2/catch.hpp>

#include <random>

#include "engine/tokenizer/bpe_tokenizer.hpp"
#include "engine/tokenizer/builtin.hpp"
#include "engine/tokenizer/parallel.hpp"
#include "tokenizer_test_util.hpp"

using namespace holmes::tokenizer;

namespace {

constexpr uint32_t kEot = 5000;

std::unique_ptr<BpeTokenizer> trained_tokenizer(const std::string& encoding) {
  const auto v = test::train_bpe(test::test_text(), 200);
  BpeSpec spec;
  spec.name = "test";
  for (size_t id = 0; id < v.tokens.size(); ++id) spec.model.tokens.add(v.tokens[id], static_cast<uint32_t>(id));
  spec.model.add_rank_merges();
  spec.model.whole_piece_first = true;
  spec.pattern = find_builtin(encoding)->pattern;
  spec.specials = {{"<|endoftext|>", kEot}, {"<|end|>", kEot + 1}};
  spec.document_token = kEot;
  return std::make_unique<BpeTokenizer>(std::move(spec));
}

// Words, long runs of spaces / newlines / digits, non-Latin text, invalid bytes, and the
// spelling of special tokens, in a seeded mix.
std::string mixed_text(size_t n, uint32_t seed) {
  const std::vector<std::string> parts = {
      " the", " cat", "sat", "\n", "\n\n\n", "   ", "\t", "12345678", "'s", "'LL", " 日本語", " héllo", "👍🏽",
      "\xff", "\xe6\x97", "!!", " <|endoftext|>", "<|end|>", "<|endof", std::string(300, ' '), std::string(90, '\n'),
      std::string(200, '7'), " \r\n", "x"};
  std::mt19937 rng(seed);
  std::string s;
  while (s.size() < n) s += parts[rng() % parts.size()];
  return s;
}

std::vector<uint32_t> streamed(const Tokenizer& t, const std::string& text, bool allow_special, int threads,
                               size_t window) {
  ParallelEncoder enc(t, allow_special, threads, /*min_chunk=*/std::max<size_t>(window / 8, 1));
  std::vector<uint32_t> out;
  size_t pos = 0, covered = 0;
  encode_document(
      enc,
      [&](char* p, size_t n) {
        const size_t k = std::min(n, text.size() - pos);
        std::copy(text.data() + pos, text.data() + pos + k, p);
        pos += k;
        return k;
      },
      window,
      [&](std::span<const uint32_t> toks, size_t bytes) {
        out.insert(out.end(), toks.begin(), toks.end());
        covered += bytes;
      });
  CHECK(covered == text.size());
  return out;
}

}  // namespace

TEST_CASE("streamed and threaded encodes equal the whole-text encode") {
  for (const char* encoding : {"gpt2", "cl100k_base", "o200k_base"}) {
    const auto tok = trained_tokenizer(encoding);
    for (uint32_t seed : {1u, 2u}) {
      const std::string text = mixed_text(60000, seed);
      for (bool allow : {false, true}) {
        const auto whole = tok->encode(text, allow);
        CHECK(tok->decode(whole) == text);
        for (size_t window : {size_t{5}, size_t{97}, size_t{4096}, size_t{1} << 20})
          for (int threads : {1, 2, 5}) {
            INFO(encoding << " seed " << seed << " allow_special " << allow << " window " << window << " threads "
                          << threads);
            REQUIRE(streamed(*tok, text, allow, threads, window) == whole);
          }
      }
    }
  }
}

TEST_CASE("special tokens come only from an encoder that allows them") {
  const auto tok = trained_tokenizer("cl100k_base");
  const std::string text = "a<|endoftext|>b <|end|><|endoftext|>";
  const auto plain = tok->encode(text, false);
  const auto special = tok->encode(text, true);
  CHECK(std::count(plain.begin(), plain.end(), kEot) == 0);
  CHECK(std::count(special.begin(), special.end(), kEot) == 2);
  CHECK(std::count(special.begin(), special.end(), kEot + 1) == 1);
  CHECK(tok->decode(plain) == text);
  CHECK(tok->decode(special) == text);
  CHECK(tok->id_count() == kEot + 2);
  CHECK(tok->token_text(kEot) == "<|endoftext|>");
  CHECK(tok->decode(std::vector<uint32_t>{kEot + 7}) == "\xEF\xBF\xBD");
}

TEST_CASE("the hash follows the vocabulary and the rules, not the name") {
  const auto a = trained_tokenizer("cl100k_base"), b = trained_tokenizer("cl100k_base");
  const auto c = trained_tokenizer("o200k_base");
  CHECK(a->hash() == b->hash());
  CHECK(a->hash() != c->hash());
}

TEST_CASE("many documents on threads equal each document encoded alone, long ones too") {
  const auto tok = trained_tokenizer("cl100k_base");
  std::vector<std::string> texts;
  std::mt19937 rng(3);
  for (int d = 0; d < 200; ++d) texts.push_back(mixed_text(rng() % 700, static_cast<uint32_t>(d)));
  texts[0] = "";
  texts[120] = mixed_text(ParallelEncoder::kLongDocument + 1000, 9);  // encoded alone, its pieces on every thread
  std::vector<std::string_view> docs(texts.begin(), texts.end());
  std::vector<uint32_t> want;
  std::vector<size_t> want_ends;
  for (const auto& t : texts) {
    const auto ids = tok->encode(t, true);
    want.insert(want.end(), ids.begin(), ids.end());
    want_ends.push_back(want.size());
  }
  for (int threads : {1, 2, 5})
    for (size_t min_chunk : {size_t{1}, size_t{4096}, size_t{1} << 20}) {
      INFO("threads " << threads << " min_chunk " << min_chunk);
      ParallelEncoder enc(*tok, true, threads, min_chunk);
      std::vector<uint32_t> out = {7};  // appended after what is there
      std::vector<size_t> ends = {99};  // replaced
      enc.encode_documents(docs, &out, &ends);
      REQUIRE(out.size() == want.size() + 1);
      CHECK(std::equal(want.begin(), want.end(), out.begin() + 1));
      for (auto& e : ends) --e;
      CHECK(ends == want_ends);
    }
}
