// BPE merging: the linear and heap algorithms against a brute-force reference of the rule
// (lowest rank first, leftmost among equals), on a trained vocabulary and random pieces.
#include <catch2/catch.hpp>

#include <map>
#include <random>

#include "engine/tokenizer/bpe.hpp"
#include "engine/tokenizer/byte_level.hpp"
#include "tokenizer_test_util.hpp"

using namespace holmes::tokenizer;

namespace {

BpeModel model_of(const test::TrainedBpe& v, bool whole_piece_first) {
  BpeModel m;
  for (size_t id = 0; id < v.tokens.size(); ++id) m.tokens.add(v.tokens[id], static_cast<uint32_t>(id));
  m.add_rank_merges();
  m.index_bytes();
  m.whole_piece_first = whole_piece_first;
  return m;
}

// The rule written directly: parts as strings, the rank of a pair = the rank of its concatenation.
std::vector<uint32_t> brute_force(const test::TrainedBpe& v, const std::string& piece) {
  std::map<std::string, uint32_t> rank;
  for (size_t id = 0; id < v.tokens.size(); ++id) rank[v.tokens[id]] = static_cast<uint32_t>(id);
  std::vector<std::string> parts;
  for (char c : piece) parts.emplace_back(1, c);
  while (parts.size() > 1) {
    size_t best = parts.size();
    uint32_t best_rank = kNoToken;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      auto it = rank.find(parts[i] + parts[i + 1]);
      if (it != rank.end() && it->second < best_rank) best_rank = it->second, best = i;
    }
    if (best == parts.size()) break;
    parts[best] += parts[best + 1];
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
  std::vector<uint32_t> out;
  for (const auto& p : parts) out.push_back(rank.at(p));
  return out;
}

std::string random_piece(std::mt19937& rng, size_t n) {
  const std::string alphabet = " thecasmonrugkl\xc3\xa9";  // includes a multi-byte character's bytes
  std::string s;
  for (size_t i = 0; i < n; ++i) s += alphabet[rng() % alphabet.size()];
  return s;
}

}  // namespace

TEST_CASE("linear and heap BPE agree with the brute-force rule on random pieces") {
  const auto v = test::train_bpe(test::test_text(), 300);
  REQUIRE(v.merges.size() == 300);
  const BpeModel m = model_of(v, false);
  std::mt19937 rng(42);
  BpeScratch s;
  for (int trial = 0; trial < 3000; ++trial) {
    const std::string piece = random_piece(rng, 1 + rng() % (trial < 2900 ? 40 : 400));
    const auto want = brute_force(v, piece);
    std::vector<uint32_t> linear, heap, dispatched;
    bpe_merge_linear(m, piece, s, &linear);
    bpe_merge_heap(m, piece, s, &heap);
    bpe_encode_piece(m, piece, s, &dispatched);
    REQUIRE(linear == want);
    REQUIRE(heap == want);
    REQUIRE(dispatched == want);
  }
}

TEST_CASE("runs of one byte: equal ranks merge leftmost first") {
  const auto v = test::train_bpe(" x" + std::string(5000, 'a') + " the the", 20);
  const BpeModel m = model_of(v, false);
  BpeScratch s;
  for (size_t n : {1, 2, 3, 5, 8, 17, 100, 1001}) {
    const std::string piece(n, 'a');
    std::vector<uint32_t> linear, heap;
    bpe_merge_linear(m, piece, s, &linear);
    bpe_merge_heap(m, piece, s, &heap);
    CHECK(heap == brute_force(v, piece));
    CHECK(linear == heap);
  }
  // A long run takes the heap path and still covers every byte.
  std::vector<uint32_t> out;
  bpe_encode_piece(m, std::string(200000, 'a'), s, &out);
  size_t bytes = 0;
  for (uint32_t id : out) bytes += m.tokens.bytes(id).size();
  CHECK(bytes == 200000);
  CHECK(out.size() < 200000 / 8);  // the trained merges join long runs of 'a' 
}

TEST_CASE("whole_piece_first returns a piece that is a token as that token") {
  const auto v = test::train_bpe(test::test_text(), 50);
  // Merges as a merges list gives them (pairs of the list only), plus "zq", which no merge makes.
  BpeModel plain;
  for (size_t id = 0; id < v.tokens.size(); ++id) plain.tokens.add(v.tokens[id], static_cast<uint32_t>(id));
  plain.tokens.add("zq", static_cast<uint32_t>(v.tokens.size()));
  for (size_t i = 0; i < v.merges.size(); ++i)
    plain.pairs.add(plain.tokens.find(v.merges[i].first), plain.tokens.find(v.merges[i].second),
                    static_cast<uint32_t>(i), static_cast<uint32_t>(256 + i));
  plain.index_bytes();
  BpeModel whole = plain;
  whole.whole_piece_first = true;
  BpeScratch s;
  std::vector<uint32_t> a, b;
  bpe_encode_piece(plain, "zq", s, &a);
  bpe_encode_piece(whole, "zq", s, &b);
  CHECK(a.size() == 2);
  CHECK(b == std::vector<uint32_t>{static_cast<uint32_t>(v.tokens.size())});
}

TEST_CASE("a vocabulary without every byte is refused naming the byte") {
  BpeModel m;
  for (int b = 0; b < 256; ++b)
    if (b != 0x41) m.tokens.add(std::string(1, static_cast<char>(b)), static_cast<uint32_t>(b));
  REQUIRE_THROWS_WITH(m.index_bytes(), Catch::Contains("0x41"));
}

TEST_CASE("token table: lookups, duplicates, gaps") {
  TokenTable t;
  for (uint32_t i = 0; i < 5000; ++i) t.add("tok" + std::to_string(i), i * 2);
  CHECK(t.size() == 5000);
  CHECK(t.find("tok1234") == 2468);
  CHECK(t.find("tok5000") == kNoToken);
  CHECK(t.bytes(2468) == "tok1234");
  CHECK_FALSE(t.has(1));
  CHECK_THROWS_AS(t.add("tok1", 1), std::invalid_argument);
  CHECK_THROWS_AS(t.add("new", 2), std::invalid_argument);
}

TEST_CASE("byte-level alphabet: every byte round-trips, GPT-2's spellings") {
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  const std::string spelled = byte_level_from_bytes(all);
  CHECK(bytes_from_byte_level(spelled) == all);
  CHECK(byte_level_from_bytes(" ") == "\xC4\xA0");   // U+0120 'Ġ'
  CHECK(byte_level_from_bytes("\n") == "\xC4\x8A");  // U+010A 'Ċ'
  CHECK(byte_level_from_bytes("a!") == "a!");
  CHECK_FALSE(bytes_from_byte_level("\xE4\xB8\x80").has_value());  // U+4E00 is not in the alphabet
  CHECK_FALSE(bytes_from_byte_level(" ").has_value());              // a raw space is spelled 'Ġ'
  CHECK(byte_level_order(0) == '!');
  CHECK(byte_level_order(255) == 0xAD);
}
