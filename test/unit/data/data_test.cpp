// Token files (format errors name the file), deterministic batching, the permutation.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "engine/data/batches.hpp"
#include "engine/data/token_file.hpp"

using namespace holmes::data;

namespace {

std::string temp_path(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / "holmes_train_test";
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

void write_bytes(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::vector<char> llmc_bytes(int32_t magic, int32_t version, int32_t count, const std::vector<uint16_t>& toks) {
  std::vector<int32_t> header(256, 0);
  header[0] = magic;
  header[1] = version;
  header[2] = count;
  std::vector<char> out(1024 + 2 * toks.size());
  std::memcpy(out.data(), header.data(), 1024);
  if (!toks.empty()) std::memcpy(out.data() + 1024, toks.data(), 2 * toks.size());
  return out;
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const holmes::UserError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("llm.c token file round-trips and auto-detects", "[train]") {
  std::vector<uint16_t> toks = {256, 72, 105, 10, 0, 255};
  auto path = temp_path("ok.bin");
  write_llmc_tokens(path, toks);
  auto f = TokenFile::open(path, TokenFormat::kAuto, 257);
  CHECK(f.format() == TokenFormat::kLlmc);
  REQUIRE(f.tokens().size() == toks.size());
  for (size_t i = 0; i < toks.size(); ++i) CHECK(f.tokens()[i] == toks[i]);
}

TEST_CASE("raw uint16 files are read without a header", "[train]") {
  std::vector<uint16_t> toks = {1, 2, 3, 50000};
  auto path = temp_path("raw.bin");
  write_bytes(path, std::vector<char>(reinterpret_cast<char*>(toks.data()), reinterpret_cast<char*>(toks.data()) + 8));
  auto f = TokenFile::open(path, TokenFormat::kAuto, 50257);
  CHECK(f.format() == TokenFormat::kRawUint16);
  CHECK(f.tokens()[3] == 50000);
  auto odd = temp_path("odd.bin");
  write_bytes(odd, {1, 2, 3});
  auto msg = error_of([&] { TokenFile::open(odd, TokenFormat::kRawUint16, 257); });
  CHECK(msg.find(odd) != std::string::npos);
  CHECK(msg.find("odd size") != std::string::npos);
}

TEST_CASE("token file errors name the file and the problem", "[train]") {
  auto path = temp_path("bad.bin");
  SECTION("wrong magic") {
    write_bytes(path, llmc_bytes(12345, 1, 2, {1, 2}));
    auto msg = error_of([&] { TokenFile::open(path, TokenFormat::kLlmc, 257); });
    CHECK(msg.find(path) != std::string::npos);
    CHECK(msg.find("magic") != std::string::npos);
    CHECK(msg.find("12345") != std::string::npos);
  }
  SECTION("wrong magic under format auto: the header is not llm.c's, and both formats were tried") {
    write_bytes(path, llmc_bytes(12345, 1, 2, {1, 2}));
    auto msg = error_of([&] { TokenFile::open(path, TokenFormat::kAuto, 257); });
    CHECK(msg.find(path) != std::string::npos);
    CHECK(msg.find("the header is not llm.c's: it starts with 12345") != std::string::npos);
    CHECK(msg.find("magic number 20240520") != std::string::npos);
    CHECK(msg.find("llm.c's layout (version 1, 2 tokens") != std::string::npos);  // a damaged llm.c file
    CHECK(msg.find("tried llmc") != std::string::npos);
    CHECK(msg.find("tried raw-uint16: token id 12345 at position 0") != std::string::npos);
    // Neither format and no llm.c layout: an odd-sized file of other bytes (not text, which
    // file_kind_test covers).
    write_bytes(path, {'\x01', '\x02', '\x03'});
    msg = error_of([&] { TokenFile::open(path, TokenFormat::kAuto, 257); });
    CHECK(msg.find("too short for llm.c's 1024-byte header") != std::string::npos);
    CHECK(msg.find("tried raw-uint16: the file has an odd size (3 bytes)") != std::string::npos);
    CHECK(msg.find("layout") == std::string::npos);
  }
  SECTION("truncated") {
    write_bytes(path, llmc_bytes(kLlmcMagic, 1, 10, {1, 2, 3}));
    auto msg = error_of([&] { TokenFile::open(path, TokenFormat::kAuto, 257); });
    CHECK(msg.find(path) != std::string::npos);
    CHECK(msg.find("truncated") != std::string::npos);
  }
  SECTION("shorter than the header") {
    write_bytes(path, std::vector<char>(100, 0));
    CHECK(error_of([&] { TokenFile::open(path, TokenFormat::kLlmc, 257); }).find("truncated") != std::string::npos);
  }
  SECTION("unsupported version") {
    write_bytes(path, llmc_bytes(kLlmcMagic, 2, 1, {1}));
    CHECK(error_of([&] { TokenFile::open(path, TokenFormat::kAuto, 257); }).find("version 2") != std::string::npos);
  }
  SECTION("token beyond the vocabulary") {
    write_bytes(path, llmc_bytes(kLlmcMagic, 1, 4, {1, 2, 300, 4}));
    auto msg = error_of([&] { TokenFile::open(path, TokenFormat::kAuto, 257); });
    CHECK(msg.find(path) != std::string::npos);
    CHECK(msg.find("token id 300 at position 2") != std::string::npos);
  }
  SECTION("missing file") {
    auto msg = error_of([&] { TokenFile::open(temp_path("nope.bin"), TokenFormat::kAuto, 257); });
    CHECK(msg.find("nope.bin") != std::string::npos);
  }
  CHECK_THROWS_AS(parse_token_format("bin"), holmes::UserError);
}

TEST_CASE("permute_index is a bijection for many sizes", "[train]") {
  for (uint64_t n : {1u, 2u, 3u, 5u, 16u, 17u, 100u, 1000u, 4097u}) {
    std::vector<int> hit(n, 0);
    for (uint64_t i = 0; i < n; ++i) {
      uint64_t j = permute_index(i, n, 99);
      REQUIRE(j < n);
      hit[j]++;
    }
    CHECK(std::all_of(hit.begin(), hit.end(), [](int h) { return h == 1; }));
  }
  // A different key gives a different order.
  int same = 0;
  for (uint64_t i = 0; i < 1000; ++i) same += permute_index(i, 1000, 1) == permute_index(i, 1000, 2);
  CHECK(same < 50);
}

TEST_CASE("batches are deterministic, shifted targets, distinct across ranks", "[train]") {
  const int T = 8, B = 2;
  std::vector<uint16_t> stream(2000);
  std::iota(stream.begin(), stream.end(), 0);  // token = its position: chunks are easy to identify
  std::vector<uint16_t> second(500, 7);
  BatchSampler s({stream, second}, T, 42, true);
  CHECK(s.chunk_count() == (2000 - T) / T + (500 - T) / T);
  std::vector<int32_t> x(B * T), y(B * T), x2(B * T), y2(B * T);
  BatchCoord c{.step = 5, .micro = 1, .dp_rank = 0, .dp_size = 2, .micro_batch = B, .global_batch = 8,
               .origin = {}};
  s.fill_batch(c, x.data(), y.data());
  BatchSampler again({stream, second}, T, 42, true);
  again.fill_batch(c, x2.data(), y2.data());
  CHECK(x == x2);  // same (seed, step, micro, rank): same batch, as a resumed run needs
  CHECK(y == y2);
  for (int i = 0; i < B * T; ++i)
    if (x[i] != 7) CHECK(y[i] == x[i] + 1);
  // All sequences of one step across 2 ranks x 2 micro-batches x B come from distinct chunks.
  std::set<int32_t> firsts;
  int count = 0;
  for (int rank = 0; rank < 2; ++rank)
    for (int micro = 0; micro < 2; ++micro) {
      BatchCoord cc{.step = 3, .micro = micro, .dp_rank = rank, .dp_size = 2, .micro_batch = B, .global_batch = 8,
                    .origin = {}};
      s.fill_batch(cc, x.data(), y.data());
      for (int b = 0; b < B; ++b, ++count)
        if (x[b * T] != 7) firsts.insert(x[b * T]);
        else firsts.insert(-1 - count);  // second segment: constant tokens, count as distinct by slot
    }
  CHECK(firsts.size() == 8);
  // Another seed reads other batches.
  BatchSampler other({stream, second}, T, 43, true);
  other.fill_batch(c, x2.data(), y2.data());
  s.fill_batch(c, x.data(), y.data());
  CHECK(x != x2);
}

TEST_CASE("an epoch visits every chunk once", "[train]") {
  const int T = 4;
  std::vector<uint16_t> stream(403);
  std::iota(stream.begin(), stream.end(), 0);
  BatchSampler s({stream}, T, 7, true);
  const int64_t n = s.chunk_count();
  std::set<int32_t> starts;
  std::vector<int32_t> x(T), y(T);
  for (int64_t i = 0; i < n; ++i) {
    s.fill_sequence(i, x.data(), y.data());
    REQUIRE(y[T - 1] < 403);
    starts.insert(x[0]);
  }
  CHECK(static_cast<int64_t>(starts.size()) == n);
  // The unshuffled (validation) sampler reads chunks in order from the start.
  BatchSampler v({stream}, T, 7, false);
  v.fill_sequence(3, x.data(), y.data());
  CHECK(x[0] == 12);
}
