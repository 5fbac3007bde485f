// prepare-data on JSON Lines: the same documents given as JSONL (plain, gzip, zstd; escaped
// text, any key order, other keys around) and as one text file each give the same token ids,
// into llm.c's format and Megatron's; malformed lines are named with file:line, skipped and
// counted up to --max-bad-lines, past which nothing is written.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "../tokenizer/tokenizer_test_util.hpp"
#include "common/errors.hpp"
#include "engine/data/prepare.hpp"
#include "engine/data/token_file.hpp"
#include "engine/tokenizer/load.hpp"

using namespace holmes::data;
namespace fs = std::filesystem;

namespace {

fs::path temp_dir(const std::string& name) {
  auto d = fs::temp_directory_path() / fmt::format("holmes-jsonl-test-{}-{}", ::getpid(), name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void write(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

// JSON string literal of utf8 text: control characters, some non-ASCII and '/' escaped as
// \uXXXX (surrogate pairs above the BMP), the rest as they are, so the reader must unescape.
std::string json_escape(const std::string& s, bool escape_unicode) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') out += '\\', out += static_cast<char>(c), ++i;
    else if (c == '\n') out += "\\n", ++i;
    else if (c == '\t') out += "\\t", ++i;
    else if (c < 0x20) out += fmt::format("\\u{:04x}", c), ++i;
    else if (c >= 0x80 && escape_unicode) {
      const int len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
      uint32_t cp = c & (len == 4 ? 0x07 : len == 3 ? 0x0f : 0x1f);
      for (int k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
      if (cp >= 0x10000) {
        cp -= 0x10000;
        out += fmt::format("\\u{:04x}\\u{:04x}", 0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
      } else {
        out += fmt::format("\\u{:04x}", cp);
      }
      i += static_cast<size_t>(len);
    } else {
      out += static_cast<char>(c), ++i;
    }
  }
  return out + "\"";
}

// Documents of every kind a corpus has: words, long runs, newlines, quotes, backslashes,
// control characters, accents, CJK, emoji; one far longer than the others.
std::vector<std::string> documents() {
  const std::vector<std::string> parts = {" the", " cat", "sat", "\n", "\n\n", "   ", "\t", "12345", "'s", "\"quoted\"",
                                          "back\\slash", " héllo", " 日本語", "👍🏽", "\x01", " kato", " verming", "/"};
  std::mt19937 rng(7);
  std::vector<std::string> docs;
  for (int d = 0; d < 60; ++d) {
    std::string s;
    const size_t n = d == 17 ? 20000 : 1 + rng() % 300;
    while (s.size() < n) s += parts[rng() % parts.size()];
    docs.push_back(s);
  }
  return docs;
}

std::string jsonl_of(const std::vector<std::string>& docs) {
  std::string out;
  for (size_t d = 0; d < docs.size(); ++d) {
    // Other keys before and after the text, a nested object, and both escaping styles.
    if (d % 2 == 0)
      out += fmt::format("{{\"id\": {}, \"text\": {}, \"meta\": {{\"url\": \"x/{}\", \"score\": 0.5}}}}\n", d,
                         json_escape(docs[d], d % 4 == 0), d);
    else
      out += fmt::format("{{\"meta\":{{\"n\":[1,2]}},\"text\":{}}}\r\n", json_escape(docs[d], true));
  }
  return out;
}

void write_gzip(const fs::path& p, const std::string& s) {
  gzFile f = gzopen(p.c_str(), "wb");
  REQUIRE(f != nullptr);
  // Two members: readers of concatenated gzip files must read both.
  const size_t half = s.size() / 2;
  REQUIRE(gzwrite(f, s.data(), static_cast<unsigned>(half)) == static_cast<int>(half));
  gzclose(f);
  f = gzopen(p.c_str(), "ab");
  REQUIRE(gzwrite(f, s.data() + half, static_cast<unsigned>(s.size() - half)) == static_cast<int>(s.size() - half));
  gzclose(f);
}

void write_zstd(const fs::path& p, const std::string& s) {
  // Two frames, as zstd's --long or pzstd can write.
  std::string out;
  for (const std::string_view part : {std::string_view(s).substr(0, s.size() / 3), std::string_view(s).substr(s.size() / 3)}) {
    std::string frame(ZSTD_compressBound(part.size()), '\0');
    const size_t n = ZSTD_compress(frame.data(), frame.size(), part.data(), part.size(), 3);
    REQUIRE_FALSE(ZSTD_isError(n));
    out.append(frame.data(), n);
  }
  write(p, out);
}

std::vector<uint32_t> ids_of(const std::string& path, int vocab) {
  const TokenFile f = TokenFile::open(path, TokenFormat::kAuto, vocab);
  std::vector<uint32_t> v;
  for (size_t i = 0; i < f.tokens().size(); ++i) v.push_back(f.tokens()[i]);
  return v;
}

// A trained byte-level BPE in GPT-2's files, so the ids are real merges, not bytes.
std::string bpe_tokenizer(const fs::path& dir) {
  using namespace holmes::tokenizer::test;
  write_gpt2_files(train_bpe(test_text(), 200), dir);
  return (dir / "vocab.json").string();
}

}  // namespace

TEST_CASE("JSON Lines, plain, gzip or zstd, give the token ids of the same documents as text files") {
  const fs::path d = temp_dir("same");
  const std::string tok = bpe_tokenizer(d);
  const int vocab = static_cast<int>(holmes::tokenizer::load_tokenizer(tok)->id_count());
  const auto docs = documents();
  std::vector<std::string> files;
  for (size_t k = 0; k < docs.size(); ++k) {
    files.push_back((d / fmt::format("doc{:02}.txt", k)).string());
    write(files.back(), docs[k]);
  }
  prepare_tokens({.inputs = files, .out = (d / "files.bin").string(), .tokenizer = tok});
  const std::vector<uint32_t> want = ids_of((d / "files.bin").string(), vocab);
  // The expected ids are the documents encoded one by one, each after the document token.
  const auto t = holmes::tokenizer::load_tokenizer(tok);
  std::vector<uint32_t> direct;
  for (const auto& doc : docs) {
    direct.push_back(t->document_token());
    for (uint32_t id : t->encode(doc)) direct.push_back(id);
  }
  REQUIRE(want == direct);

  const std::string jsonl = jsonl_of(docs);
  write(d / "c.jsonl", jsonl);
  write_gzip(d / "c.jsonl.gz", jsonl);
  write_zstd(d / "c.jsonl.zst", jsonl);
  // Split over two files, the second compressed: documents keep their order across inputs.
  const size_t cut = jsonl.find('\n', jsonl.size() / 2) + 1;
  write(d / "part1.ndjson", jsonl.substr(0, cut));
  write_zstd(d / "part2.json.zst", jsonl.substr(cut));
  const std::vector<std::vector<std::string>> inputs = {
      {"c.jsonl"}, {"c.jsonl.gz"}, {"c.jsonl.zst"}, {"part1.ndjson", "part2.json.zst"}};
  for (const auto& names : inputs)
    for (int threads : {1, 3})
      for (size_t window : {size_t{100}, size_t{32} << 20}) {
        INFO(names[0] << " threads " << threads << " window " << window);
        std::vector<std::string> in;
        for (const auto& n : names) in.push_back((d / n).string());
        const PrepareResult r = prepare_tokens(
            {.inputs = in, .out = (d / "j.bin").string(), .tokenizer = tok, .threads = threads, .window = window});
        CHECK(r.documents == static_cast<int64_t>(docs.size()));
        CHECK(r.skipped_lines == 0);
        CHECK(ids_of((d / "j.bin").string(), vocab) == want);
      }
  // The same documents into Megatron's format: its .bin holds the same ids, one document each.
  const PrepareResult m = prepare_tokens({.inputs = {(d / "c.jsonl.zst").string()}, .out = (d / "m.idx").string(),
                                          .tokenizer = tok, .threads = 2});
  CHECK(m.sidecar == (d / "m.bin.tokenizer").string());
  const TokenFile mf = TokenFile::open((d / "m").string(), TokenFormat::kAuto, vocab);
  REQUIRE(mf.index() != nullptr);
  CHECK(mf.format() == TokenFormat::kMegatron);
  CHECK(mf.index()->documents_count() == docs.size());
  CHECK(ids_of((d / "m.bin").string(), vocab) == want);
  size_t at = 0;
  for (size_t k = 0; k < docs.size(); ++k) {
    CHECK(mf.index()->document_start(k) == static_cast<int64_t>(at));
    at += 1 + t->encode(docs[k]).size();
  }
  // The tokenizer saved beside the .bin stamps it, so a run checks its data's tokenizer.
  REQUIRE(mf.tokenizer().has_value());
  CHECK(mf.tokenizer()->hash == t->hash());
}

TEST_CASE("malformed JSON lines are named with file:line, skipped and counted, up to the limit") {
  const fs::path d = temp_dir("bad");
  write(d / "f.jsonl",
        "{\"text\": \"one\"}\n"
        "{\"text\": \"two\"\n"         // 2: not valid JSON
        "{\"text\": 5}\n"              // 3: not a string
        "\n"                           // blank: skipped silently
        "{\"body\": \"x\", \"id\": 1}\n"  // 5: no key 'text'
        "[\"text\"]\n"                 // 6: not an object
        "{\"text\": \"\"}\n"           // 7: empty document
        "{\"text\": \"three\"}");      // 8, no final newline
  std::vector<std::string> seen;
  PrepareHooks hooks;
  hooks.bad_line = [&](const std::string& s) { seen.push_back(s); };
  const std::string f = (d / "f.jsonl").string();
  const PrepareResult r = prepare_tokens({.inputs = {f}, .out = (d / "o.bin").string(), .max_bad_lines = 4}, hooks);
  CHECK(r.documents == 2);
  CHECK(r.skipped_lines == 4);
  CHECK(r.empty_documents == 1);
  REQUIRE(seen.size() == 4);
  CHECK_THAT(seen[0], Catch::StartsWith(f + ":2: not valid JSON"));
  CHECK_THAT(seen[1], Catch::StartsWith(f + ":3: 'text' is a number, not a string"));
  CHECK_THAT(seen[2], Catch::StartsWith(f + ":5: no key 'text'") && Catch::Contains("body, id") &&
                          Catch::Contains("--text-key"));
  CHECK_THAT(seen[3], Catch::StartsWith(f + ":6: an array, not a JSON object"));
  CHECK(ids_of((d / "o.bin").string(), 257) == std::vector<uint32_t>{256, 'o', 'n', 'e', 256, 't', 'h', 'r', 'e', 'e'});
  // --text-key reads another key: the other lines are the bad ones now.
  const PrepareResult body = prepare_tokens(
      {.inputs = {f}, .out = (d / "b.bin").string(), .text_key = "body", .max_bad_lines = 10}, {});
  CHECK(body.documents == 1);
  CHECK(body.skipped_lines == 6);
  // One more bad line than allowed: the run stops naming it, with nothing written.
  try {
    prepare_tokens({.inputs = {f}, .out = (d / "s.bin").string(), .max_bad_lines = 3}, hooks);
    FAIL("no error");
  } catch (const holmes::UserError& e) {
    CHECK_THAT(e.what(), Catch::Contains("more than 3 malformed JSON lines") && Catch::Contains(f + ":6:") &&
                             Catch::Contains("nothing written"));
  }
  CHECK_FALSE(fs::exists(d / "s.bin"));
  CHECK_FALSE(fs::exists(d / "s.bin.tokenizer"));
  // Only bad lines: no document, nothing written.
  write(d / "none.jsonl", "{\"x\": 1}\n");
  CHECK_THROWS_WITH(prepare_tokens({.inputs = {(d / "none.jsonl").string()}, .out = (d / "n.bin").string()}, {}),
                    Catch::Contains("hold no document"));
}

TEST_CASE("inputs the reader does not take are refused before anything is written") {
  const fs::path d = temp_dir("kinds");
  write(d / "a.jsonl.gz", "{\"text\": \"not compressed\"}\n");
  write(d / "b.txt.zst", "plain");
  write(d / "c.xz", std::string("\xfd\x37\x7a\x58\x5a\x00 xz", 9));
  write(d / "d.parquet", "PAR1....");
  const auto fails = [&](const std::string& name, const std::string& what) {
    INFO(name);
    CHECK_THROWS_WITH(prepare_tokens({.inputs = {(d / name).string()}, .out = (d / "o.bin").string()}, {}),
                      Catch::Contains(what));
    CHECK_FALSE(fs::exists(d / "o.bin"));
  };
  fails("a.jsonl.gz", "named as gzip data but does not start with its magic number");
  fails("b.txt.zst", "named as zstd data");
  fails("c.xz", "is xz data");
  fails("d.parquet", "Parquet");
  // Truncated compressed data is named as such.
  std::string z(ZSTD_compressBound(1000), '\0');
  const std::string text(1000, 'a');
  z.resize(ZSTD_compress(z.data(), z.size(), text.data(), text.size(), 1));
  write(d / "t.txt.zst", z.substr(0, z.size() - 3));
  fails("t.txt.zst", "truncated zstd data");
  // A text file compressed is still one document, decompressed.
  write_zstd(d / "ok.txt.zst", "hi");
  prepare_tokens({.inputs = {(d / "ok.txt.zst").string()}, .out = (d / "ok.bin").string()}, {});
  CHECK(ids_of((d / "ok.bin").string(), 257) == std::vector<uint32_t>{256, 'h', 'i'});
}
