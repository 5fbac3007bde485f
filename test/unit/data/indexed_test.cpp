// Megatron's indexed dataset against an independent writer and reader of the format
// (test/python/megatron_indexed.py, numpy): what it writes in every integer dtype reads back
// here document by document (documents of several sequences too), and what prepare-data
// writes reads back there the same way. Bad indexes are refused naming the problem.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "common/errors.hpp"
#include "engine/data/indexed_dataset.hpp"
#include "engine/data/prepare.hpp"
#include "engine/data/token_file.hpp"

using namespace holmes::data;
namespace fs = std::filesystem;

namespace {

using Doc = std::vector<std::vector<int64_t>>;  // sequences of ids

fs::path temp_dir(const std::string& name) {
  auto d = fs::temp_directory_path() / fmt::format("holmes-indexed-test-{}-{}", ::getpid(), name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string script() { return std::string(HOLMES_SOURCE_DIR) + "/test/python/megatron_indexed.py"; }

bool have_numpy() { return std::system("/usr/bin/python3 -c 'import numpy' > /dev/null 2>&1") == 0; }

void run(const std::string& cmd) {
  INFO(cmd);
  REQUIRE(std::system(cmd.c_str()) == 0);
}

void write_docs(const fs::path& p, const std::vector<Doc>& docs) {
  std::ofstream out(p);
  for (const Doc& d : docs) {
    for (size_t s = 0; s < d.size(); ++s) {
      out << (s ? " | " : "");
      for (size_t i = 0; i < d[s].size(); ++i) out << (i ? " " : "") << d[s][i];
    }
    out << "\n";
  }
}

std::vector<Doc> read_docs(const fs::path& p) {
  std::vector<Doc> docs;
  std::ifstream in(p);
  for (std::string line; std::getline(in, line);) {
    Doc d(1);
    std::istringstream words(line);
    for (std::string w; words >> w;) {
      if (w == "|") d.emplace_back();
      else d.back().push_back(std::stoll(w));
    }
    docs.push_back(d);
  }
  return docs;
}

// Documents of 1-3 sequences, some empty, ids below `vocab`.
std::vector<Doc> random_docs(int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Doc> docs(40);
  for (Doc& d : docs) {
    d.resize(1 + rng() % 3);
    for (auto& s : d) {
      s.resize(rng() % 7 == 0 ? 0 : 1 + rng() % 50);
      for (auto& id : s) id = static_cast<int64_t>(rng() % static_cast<uint32_t>(vocab));
    }
  }
  return docs;
}

// Document d of an opened dataset, from its index's boundaries.
std::vector<int64_t> document_ids(const TokenFile& f, uint64_t d) {
  std::vector<int64_t> v;
  for (int64_t i = f.index()->document_start(d); i < f.index()->document_start(d + 1); ++i)
    v.push_back(f.tokens().at(static_cast<size_t>(i)));
  return v;
}

std::vector<int64_t> flat(const Doc& d) {
  std::vector<int64_t> v;
  for (const auto& s : d) v.insert(v.end(), s.begin(), s.end());
  return v;
}

}  // namespace

TEST_CASE("a Megatron dataset written with numpy reads back document by document, in every integer dtype") {
  if (!have_numpy()) {
    WARN("HOLMES_SKIP: /usr/bin/python3 cannot import numpy (apt install python3-numpy)");
    return;
  }
  const fs::path d = temp_dir("numpy");
  const std::vector<std::pair<std::string, int>> dtypes = {{"uint8", 200}, {"int8", 100}, {"int16", 30000},
                                                           {"uint16", 65000}, {"int32", 100000}, {"int64", 300000}};
  for (const auto& [dtype, vocab] : dtypes) {
    INFO(dtype);
    const auto docs = random_docs(vocab, static_cast<uint32_t>(vocab));
    write_docs(d / "docs.txt", docs);
    const std::string prefix = (d / dtype).string();
    run(fmt::format("/usr/bin/python3 {} write {} {} {}", script(), (d / "docs.txt").string(), prefix, dtype));
    // The prefix, the .bin and the .idx all name it; data.format auto and megatron read it.
    for (const std::string& name : {prefix, prefix + ".bin", prefix + ".idx"}) {
      const TokenFile f = TokenFile::open(name, TokenFormat::kAuto, vocab);
      REQUIRE(f.index() != nullptr);
      CHECK(f.tokens().type() == *indexed_token_type(f.index()->dtype_code));
      REQUIRE(f.index()->documents_count() == docs.size());
      for (size_t k = 0; k < docs.size(); ++k) CHECK(document_ids(f, k) == flat(docs[k]));
    }
    CHECK(TokenFile::open(prefix, TokenFormat::kMegatron, vocab).index() != nullptr);
    // A vocabulary that the ids do not fit: refused naming the id.
    CHECK_THROWS_WITH(TokenFile::open(prefix, TokenFormat::kAuto, vocab / 2),
                      Catch::Contains("outside the vocabulary") && Catch::Contains(prefix + ".bin"));
  }
  // Negative ids (a signed dtype) are not token ids.
  write_docs(d / "neg.txt", {Doc{{3, -4, 5}}});
  run(fmt::format("/usr/bin/python3 {} write {} {} int16", script(), (d / "neg.txt").string(), (d / "neg").string()));
  CHECK_THROWS_WITH(TokenFile::open((d / "neg").string(), TokenFormat::kAuto, 100),
                    Catch::Contains("token id -4 at position 1"));
  // Float ids are refused by their dtype, naming what is accepted.
  run(fmt::format("/usr/bin/python3 {} write {} {} float32", script(), (d / "neg.txt").string(), (d / "f32").string()));
  CHECK_THROWS_WITH(TokenFile::open((d / "f32").string(), TokenFormat::kAuto, 100),
                    Catch::Contains("float32 (code 7)") && Catch::Contains("token ids are integers"));
}

TEST_CASE("prepare-data's Megatron dataset reads back with numpy document by document") {
  if (!have_numpy()) {
    WARN("HOLMES_SKIP: /usr/bin/python3 cannot import numpy (apt install python3-numpy)");
    return;
  }
  const fs::path d = temp_dir("ours");
  const std::vector<std::string> texts = {"first document", "", "x", "the third\nhas two lines", "é"};
  std::string jsonl;
  for (const auto& t : texts) jsonl += fmt::format("{{\"text\": \"{}\"}}\n", t == "the third\nhas two lines" ? "the third\\nhas two lines" : t);
  std::ofstream(d / "in.jsonl") << jsonl;
  const PrepareResult r = prepare_tokens({.inputs = {(d / "in.jsonl").string()}, .out = (d / "ours").string(),
                                          .format = OutputFormat::kMegatron});
  CHECK(r.documents == 4);  // the empty one is left out
  CHECK(r.empty_documents == 1);
  run(fmt::format("/usr/bin/python3 {} read {} {}", script(), (d / "ours").string(), (d / "back.txt").string()));
  const auto back = read_docs(d / "back.txt");
  std::vector<Doc> want;
  for (const auto& t : texts) {
    if (t.empty()) continue;
    Doc doc(1, {256});  // the document token, then the bytes
    for (unsigned char c : t) doc[0].push_back(c);
    want.push_back(doc);
  }
  CHECK(back == want);
}

TEST_CASE("a bad Megatron index is refused naming the problem") {
  const fs::path d = temp_dir("bad");
  const auto idx = [&](uint8_t code, uint64_t s, uint64_t docs, std::vector<int32_t> lengths, std::vector<int64_t> ptrs,
                       std::vector<int64_t> doc_index, const std::string& magic = std::string(kIndexMagic, 9)) {
    std::string b = magic;
    const uint64_t version = 1;
    b.append(reinterpret_cast<const char*>(&version), 8);
    b.push_back(static_cast<char>(code));
    b.append(reinterpret_cast<const char*>(&s), 8);
    b.append(reinterpret_cast<const char*>(&docs), 8);
    b.append(reinterpret_cast<const char*>(lengths.data()), 4 * lengths.size());
    b.append(reinterpret_cast<const char*>(ptrs.data()), 8 * ptrs.size());
    b.append(reinterpret_cast<const char*>(doc_index.data()), 8 * doc_index.size());
    std::ofstream(d / "x.idx", std::ios::binary) << b;
  };
  std::ofstream(d / "x.bin", std::ios::binary) << std::string(8, '\1');  // 4 uint16 ids
  const auto fails = [&](const std::string& what) {
    INFO(what);
    CHECK_THROWS_WITH(TokenFile::open((d / "x").string(), TokenFormat::kAuto, 1000), Catch::Contains(what));
  };
  idx(8, 2, 3, {1, 3}, {0, 2}, {0, 1, 2});
  CHECK(TokenFile::open((d / "x").string(), TokenFormat::kAuto, 1000).index()->documents_count() == 2);
  idx(8, 2, 3, {1, 3}, {0, 2}, {0, 1, 2}, "MMIDIDX\0\1");
  fails("does not start with MMIDIDX");
  idx(9, 2, 3, {1, 3}, {0, 2}, {0, 1, 2});
  fails("unknown code 9");
  idx(8, 2, 3, {1, 2}, {0, 2}, {0, 1, 2});
  fails("the .bin has 8 bytes");
  idx(8, 2, 3, {1, 3}, {0, 4}, {0, 1, 2});
  fails("sequence 1 starts at byte 4");
  idx(8, 2, 4, {1, 3}, {0, 2}, {0, 2, 1, 2});
  fails("below the one before it");
  idx(8, 2, 3, {1, 3}, {0, 2}, {0, 1, 3});
  fails("run from 0 to the sequence count 2");
  idx(8, 5, 3, {1, 3}, {0, 2}, {0, 1, 2});
  fails("need");
  CHECK_THROWS_WITH(TokenFile::open((d / "none").string(), TokenFormat::kMegatron, 1000),
                    Catch::Contains("needs PREFIX.bin and PREFIX.idx"));
}
