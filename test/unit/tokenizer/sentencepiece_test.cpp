// SentencePiece models through libsentencepiece: a model trained here (BPE with byte
// fallback and no normalization, as Llama 2's) loads from its .model file, round-trips text, and gives control
// tokens only when allowed.
#include <catch2/catch.hpp>
#include <sentencepiece_trainer.h>

#include <algorithm>

#include "engine/tokenizer/load.hpp"
#include "tokenizer_test_util.hpp"

using namespace holmes::tokenizer;

TEST_CASE("a SentencePiece model loads, round-trips and keeps <s> as text unless allowed") {
  const auto dir = test::temp_dir("sentencepiece");
  std::string lines = test::test_text() + " naïve café 日本";
  // SentencePiece trains on lines (sentences): cut the words into lines of about 80 bytes.
  for (size_t i = lines.find(' ', 80); i != std::string::npos; i = lines.find(' ', i + 80)) lines[i] = '\n';
  test::write_file(dir / "train.txt", lines);
  const std::string prefix = (dir / "sp").string();
  const auto status = sentencepiece::SentencePieceTrainer::Train(
      "--input=" + (dir / "train.txt").string() + " --model_prefix=" + prefix +
      " --vocab_size=400 --hard_vocab_limit=false --character_coverage=1.0 --model_type=bpe --byte_fallback=true --normalization_rule_name=identity --remove_extra_whitespaces=false --minloglevel=2");
  INFO(status.ToString());
  REQUIRE(status.ok());
  const auto t = load_tokenizer(prefix + ".model");
  CHECK(t->id_count() > 300);
  CHECK_FALSE(t->splittable());
  CHECK(t->token_text(t->document_token()) == "<s>");
  // Llama 2's settings (identity normalizer, whitespace kept): decoding gives the text back.
  const std::string text = "  the cat  sat on the mat,\n naïve 日本 ok ";
  CHECK(t->decode(t->encode(text)) == text);
  const std::string with = "a <s> b";
  const auto plain = t->encode(with, false), special = t->encode(with, true);
  CHECK(std::count(plain.begin(), plain.end(), t->document_token()) == 0);
  CHECK(std::count(special.begin(), special.end(), t->document_token()) == 1);
}
