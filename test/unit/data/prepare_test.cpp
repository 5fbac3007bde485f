// prepare-data: the document token before each file, 16- or 32-bit files by vocabulary size,
// the tokenizer stamped in the header and saved beside the file, streaming on threads equal
// to encoding whole, and bad paths refused before anything is written.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/errors.hpp"
#include "engine/data/prepare.hpp"
#include "engine/data/token_file.hpp"
#include "engine/tokenizer/load.hpp"
#include "engine/tokenizer/saved.hpp"

using namespace holmes::data;
namespace fs = std::filesystem;

namespace {

fs::path temp_dir(const std::string& name) {
  auto d = fs::temp_directory_path() / ("holmes-prepare-test-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void write(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

std::string base64(const std::string& t) {
  static const char* d = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < t.size(); i += 3) {
    uint32_t n = static_cast<unsigned char>(t[i]) << 16;
    if (i + 1 < t.size()) n |= static_cast<unsigned char>(t[i + 1]) << 8;
    if (i + 2 < t.size()) n |= static_cast<unsigned char>(t[i + 2]);
    out += d[(n >> 18) & 63];
    out += d[(n >> 12) & 63];
    out += i + 1 < t.size() ? d[(n >> 6) & 63] : '=';
    out += i + 2 < t.size() ? d[n & 63] : '=';
  }
  return out;
}

// A rank file the size of o200k_base's (199998 ranks: the bytes, "ab"..., then filler), so
// its ids need 32 bits.
fs::path big_rank_file(const fs::path& dir) {
  std::string out;
  for (int i = 0; i < 199998; ++i) {
    std::string tok = i < 256 ? std::string(1, static_cast<char>(i)) : "w" + std::to_string(i);
    if (i == 256) tok = "ab";
    if (i == 257) tok = " the";
    out += base64(tok) + " " + std::to_string(i) + "\n";
  }
  write(dir / "o200k_base.tiktoken", out);
  return dir / "o200k_base.tiktoken";
}

std::vector<uint32_t> ids(const TokenFile& f) {
  std::vector<uint32_t> v;
  for (size_t i = 0; i < f.tokens().size(); ++i) v.push_back(f.tokens()[i]);
  return v;
}

}  // namespace

TEST_CASE("bytes: 16-bit llm.c file, end-of-text before each document, stamped and saved") {
  const fs::path d = temp_dir("bytes");
  write(d / "a.txt", "hi");
  write(d / "b.txt", "\xff");
  const PrepareResult r = prepare_tokens({.inputs = {(d / "a.txt").string(), (d / "b.txt").string()},
                                          .out = (d / "ab.bin").string()},
                                         {});
  CHECK(r.tokens == 5);
  CHECK(r.token_bytes == 2);
  const TokenFile f = TokenFile::open((d / "ab.bin").string(), TokenFormat::kAuto, 257);
  CHECK(ids(f) == std::vector<uint32_t>{256, 'h', 'i', 256, 255});
  REQUIRE(f.tokenizer().has_value());
  const auto saved = holmes::tokenizer::load_saved_tokenizer(tokenizer_sidecar((d / "ab.bin").string()));
  CHECK(saved->hash() == f.tokenizer()->hash);
  CHECK(saved->name() == "bytes");
}

TEST_CASE("a vocabulary over 65536 ids: 32-bit tokens, identical to one whole encode, threads and windows alike") {
  const fs::path d = temp_dir("big");
  const fs::path ranks = big_rank_file(d);
  std::string text;
  for (int i = 0; i < 3000; ++i) text += " the ab cab w300 w199997\n" + std::to_string(i) + " <|endoftext|>  ";
  write(d / "t.txt", text);
  const auto tok = holmes::tokenizer::load_tokenizer(ranks.string());
  std::vector<uint32_t> want = {tok->document_token()};
  for (uint32_t id : tok->encode(text)) want.push_back(id);
  for (int threads : {1, 3}) {
    PrepareRequest r{.inputs = {(d / "t.txt").string()}, .out = (d / "t.bin").string(),
                     .tokenizer = "o200k_base:" + ranks.string(), .threads = threads, .window = 1000};
    const PrepareResult res = prepare_tokens(r, {});
    CHECK(res.token_bytes == 4);
    const TokenFile f = TokenFile::open(r.out, TokenFormat::kAuto, 200019);
    CHECK(ids(f) == want);
    CHECK(f.tokenizer()->ids == 200019);
    CHECK(f.tokenizer()->hash == tok->hash());
  }
  // Too small a model for the file's tokenizer: refused naming both.
  try {
    TokenFile::open((d / "t.bin").string(), TokenFormat::kAuto, 50257);
    FAIL("opened");
  } catch (const holmes::UserError& e) {
    CHECK_THAT(e.what(), Catch::Contains("200019 ids") && Catch::Contains("50257"));
  }
}

TEST_CASE("an unstamped 16-bit file is refused for a vocabulary over 65536 ids") {
  const fs::path d = temp_dir("narrow");
  write_llmc_tokens((d / "a.bin").string(), std::vector<uint16_t>{1, 2, 3});
  CHECK_THROWS_WITH(TokenFile::open((d / "a.bin").string(), TokenFormat::kAuto, 100277),
                    Catch::Contains("16-bit token file") && Catch::Contains("100277"));
  // A stamped one names its tokenizer, which the callers compare with the model's.
  write(d / "a.txt", "hello");
  prepare_tokens({.inputs = {(d / "a.txt").string()}, .out = (d / "b.bin").string()}, {});
  CHECK(TokenFile::open((d / "b.bin").string(), TokenFormat::kAuto, 100277).tokenizer()->ids == 257);
}

TEST_CASE("bad paths: refused naming the file, nothing written") {
  const fs::path d = temp_dir("bad");
  write(d / "a.txt", "text");
  write(d / "empty.txt", "");
  const auto fails = [&](PrepareRequest r, const std::string& what) {
    INFO(what);
    CHECK_THROWS_WITH(prepare_tokens(r, {}), Catch::Contains(what));
    CHECK_FALSE(fs::exists(r.out));
    CHECK_FALSE(fs::exists(tokenizer_sidecar(r.out)));
  };
  const std::string a = (d / "a.txt").string(), out = (d / "out.bin").string();
  fails({.inputs = {(d / "none.txt").string()}, .out = out}, "none.txt' does not exist");
  fails({.inputs = {d.string()}, .out = out}, "is a folder");
  fails({.inputs = {(d / "empty.txt").string()}, .out = out}, "is empty");
  fails({.inputs = {a}, .out = out, .tokenizer = (d / "none.json").string()}, "none.json");
  fails({.inputs = {a}, .out = (d / "no" / "x.bin").string()}, "does not exist");
  if (::geteuid() != 0) {
    write(d / "secret.txt", "x");
    fs::permissions(d / "secret.txt", fs::perms::none);
    fails({.inputs = {(d / "secret.txt").string()}, .out = out}, "cannot be read");
  }
  // The output is an input: the text is kept as it was.
  CHECK_THROWS_WITH(prepare_tokens({.inputs = {a}, .out = a}, {}), Catch::Contains("is also an --input"));
  std::ifstream in(a);
  CHECK(std::string(std::istreambuf_iterator<char>(in), {}) == "text");
  // A stop signal ends it with nothing written.
  int stopped = 0;
  PrepareHooks stop;
  stop.stop_signal = [] { return 2; };
  prepare_tokens({.inputs = {a}, .out = out}, stop, &stopped);
  CHECK(stopped == 2);
  CHECK_FALSE(fs::exists(out));
  for (const auto& e : fs::directory_iterator(d)) CHECK(e.path().filename().string().find(".tmp") == std::string::npos);
}
