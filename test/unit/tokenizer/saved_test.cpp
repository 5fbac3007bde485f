// Saved tokenizers (a token file's sidecar, a run's copy) read back to the same hash and are
// refused when their files changed; a BPE tokenizer exported as tokenizer.json reads back
// (with our own loader) and encodes the same.
#include <catch2/catch.hpp>

#include "common/errors.hpp"
#include "engine/tokenizer/hf_export.hpp"
#include "engine/tokenizer/load.hpp"
#include "engine/tokenizer/saved.hpp"
#include "tokenizer_test_util.hpp"

using namespace holmes::tokenizer;
namespace fs = std::filesystem;

TEST_CASE("a saved tokenizer reads back to the same hash, and changed files are refused") {
  const auto v = test::train_bpe(test::test_text(), 100);
  const fs::path dir = test::temp_dir("saved");
  fs::create_directories(dir / "src");
  test::write_gpt2_files(v, dir / "src");
  const auto t = load_tokenizer((dir / "src" / "vocab.json").string());
  save_tokenizer(*t, (dir / "copy").string());
  const auto back = load_saved_tokenizer((dir / "copy").string());
  CHECK(back->hash() == t->hash());
  CHECK(read_saved_info((dir / "copy").string()).ids == t->id_count());
  save_tokenizer(*load_tokenizer("bytes"), (dir / "bytes").string());
  CHECK(load_saved_tokenizer((dir / "bytes").string())->name() == "bytes");
  // Saving again replaces the copy; a folder that is not a saved tokenizer is never replaced.
  save_tokenizer(*t, (dir / "copy").string());
  fs::create_directories(dir / "other");
  CHECK_THROWS(save_tokenizer(*t, (dir / "other").string()));
  // A merge line edited after saving: the hash no longer matches.
  std::ifstream in(dir / "copy" / "merges.txt");
  std::string merges((std::istreambuf_iterator<char>(in)), {});
  const size_t second = merges.find('\n', merges.find('\n') + 1);
  std::swap(merges[second + 1], merges[merges.find('\n', second + 1) + 1]);  // reorder two merges' first bytes
  test::write_file(dir / "copy" / "merges.txt", merges);
  CHECK_THROWS_AS(load_saved_tokenizer((dir / "copy").string()), holmes::UserError);
}

TEST_CASE("tokenizer.json export: merges lists and rank vocabularies read back and encode alike") {
  const auto v = test::train_bpe(test::test_text(), 200);
  const fs::path dir = test::temp_dir("export");
  test::write_gpt2_files(v, dir);
  const std::string text = test::test_text().substr(0, 20000) + " <|endoftext|>\n\n  ünïcode 123456";
  // A merges list (GPT-2's files), and tiktoken's ranks (no merges list: made from the ranks).
  BpeSpec ranks;
  for (size_t id = 0; id < v.tokens.size(); ++id) ranks.model.tokens.add(v.tokens[id], static_cast<uint32_t>(id));
  ranks.model.add_rank_merges();
  ranks.model.whole_piece_first = true;
  ranks.pattern = find_builtin("cl100k_base")->pattern;
  ranks.specials = {{"<|endoftext|>", 9000}};
  ranks.document_token = 9000;
  std::vector<std::unique_ptr<Tokenizer>> tokenizers;
  tokenizers.push_back(load_tokenizer((dir / "vocab.json").string()));
  tokenizers.push_back(std::make_unique<BpeTokenizer>(std::move(ranks)));
  for (const auto& t : tokenizers) {
    const auto* bpe = dynamic_cast<const BpeTokenizer*>(t.get());
    REQUIRE(bpe);
    test::write_file(dir / "exported.json", hf_tokenizer_json(*bpe));
    const auto back = load_tokenizer((dir / "exported.json").string());
    CHECK(back->encode(text) == t->encode(text));
    CHECK(back->document_token() == t->document_token());
    CHECK(back->id_count() == t->id_count());
  }
}
