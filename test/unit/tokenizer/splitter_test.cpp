// Split patterns under PCRE2: pieces of known texts, the Rust-regex differences the
// translation removes, and pieces that cover invalid UTF-8.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "engine/tokenizer/builtin.hpp"
#include "engine/tokenizer/splitter.hpp"

using namespace holmes::tokenizer;

namespace {

std::vector<std::string> pieces(const std::string& pattern, const std::string& text) {
  Splitter s(pattern);
  Splitter::Cursor c(s);
  std::vector<std::string> out;
  for (size_t pos = 0; pos < text.size();) {
    const size_t end = c.next(text, pos, false).end;
    REQUIRE(end > pos);
    out.push_back(text.substr(pos, end - pos));
    pos = end;
  }
  return out;
}

using V = std::vector<std::string>;

}  // namespace

TEST_CASE("GPT-2's pattern: words keep their leading space, the last space of a run goes to the next word") {
  CHECK(pieces(kGpt2Pattern, "Hello world's  123\n\nfoo") == V{"Hello", " world", "'s", " ", " 123", "\n", "\n", "foo"});
  CHECK(pieces(kGpt2Pattern, "end   ") == V{"end", "   "});
}

TEST_CASE("cl100k's pattern: case-insensitive contractions, digits in threes, newline runs") {
  const std::string cl100k = find_builtin("cl100k_base")->pattern;
  CHECK(pieces(cl100k, "Hello  world\n\n  x") == V{"Hello", " ", " world", "\n\n", " ", " x"});
  CHECK(pieces(cl100k, "I'M 1234567") == V{"I", "'M", " ", "123", "456", "7"});
}

TEST_CASE("whitespace is Unicode White_Space as in Rust, not PCRE2's (U+180E is not a space)") {
  const std::string t = translate_pattern("a\\s+[^\\s\\p{L}]\\S");
  CHECK(t.find("\\s") == std::string::npos);
  CHECK(t.find("\\S") == std::string::npos);
  // As a space, U+180E would split the run; as a format character it joins the punctuation.
  CHECK(pieces(kGpt2Pattern, "x\u180E\u180Ey") == V{"x", "\u180E\u180E", "y"});
  CHECK(pieces(kGpt2Pattern, "x\u3000\u3000y") == V{"x", "\u3000", "\u3000", "y"});
}

TEST_CASE("the end anchor matches only at the very end, as in Rust") {
  CHECK(pieces("x$|x\\n|\\n", "x\n") == V{"x\n"});
}

TEST_CASE("character classes: a leading closing bracket and POSIX classes are kept") {
  CHECK(translate_pattern("[]a]") == "[]a]");
  CHECK(translate_pattern("[^]\\s]").find("\\x{9}") != std::string::npos);
  CHECK(translate_pattern("[[:alpha:]\\s]").starts_with("[[:alpha:]"));
  CHECK_THROWS_AS(translate_pattern("[abc"), std::invalid_argument);
  CHECK_THROWS_AS(Splitter("(unclosed"), std::invalid_argument);
}

TEST_CASE("pieces cover invalid UTF-8: bytes no alternative matches form pieces of their own") {
  const std::string text = "ab\xff\xfe" "cd \xe6\x97";
  const V got = pieces(kGpt2Pattern, text);
  std::string joined;
  for (const auto& p : got) joined += p;
  CHECK(joined == text);
  CHECK(got == V{"ab", "\xff\xfe", "cd", " ", "\xe6\x97"});
}

TEST_CASE("with more text to come, a piece that reaches the end is partial") {
  Splitter s(kGpt2Pattern);
  Splitter::Cursor c(s);
  const std::string text = "hello wor";
  CHECK(c.next(text, 0, true).end == 5);
  CHECK_FALSE(c.next(text, 0, true).partial);
  CHECK(c.next(text, 5, true).partial);
  CHECK_FALSE(c.next(text, 5, false).partial);
}
