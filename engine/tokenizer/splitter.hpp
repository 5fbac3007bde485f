// The pre-tokenizer of byte-level BPE: a split pattern (tiktoken's `pat_str`, a Hugging Face
// Split regex) run by PCRE2 in UTF + UCP mode, JIT-compiled. The text is cut into pieces:
// every match is a piece, and so is every stretch between matches (bytes no alternative
// matches: invalid UTF-8, or characters a custom pattern does not cover), so the pieces
// always cover the text exactly and decode(encode(x)) == x.
//
// Patterns are written for Rust's regex (tiktoken, HF tokenizers). Two differences with PCRE2
// are removed when the pattern is compiled:
//   - `\s` / `\S` outside a character class, and `\s` inside one, become the explicit
//     Unicode White_Space set (PCRE2's UCP `\s` also matches U+180E, which Unicode 6.3
//     removed from White_Space);
//   - `$` matches only at the very end (PCRE2_DOLLAR_ENDONLY), as in Rust.
// Invalid UTF-8 is allowed in the text (PCRE2_MATCH_INVALID_UTF): no match ever contains it.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace holmes::tokenizer {

// The pattern as PCRE2 compiles it (see above). std::invalid_argument for an unterminated
// escape or class.
std::string translate_pattern(std::string_view rust_pattern);

class Splitter {
 public:
  // std::invalid_argument with PCRE2's message and the offset when the pattern does not compile.
  explicit Splitter(std::string_view pattern);
  ~Splitter();
  Splitter(const Splitter&) = delete;
  Splitter& operator=(const Splitter&) = delete;

  const std::string& pattern() const { return pattern_; }

  // One thread's matcher (PCRE2 match data and JIT stack). Not shared between threads.
  class Cursor {
   public:
    explicit Cursor(const Splitter& s);
    ~Cursor();
    Cursor(const Cursor&) = delete;
    Cursor& operator=(const Cursor&) = delete;

    // The next piece of `text` starting at `from` (< text.size()): [from, end). `more`
    // says text continues past its end (a streaming window): then `partial` is set when
    // the piece's end, or the decision to end it there, depended on the end of `text`
    // (PCRE2 partial matching), and the piece must be cut again with more text.
    struct Piece {
      size_t end = 0;
      bool partial = false;
    };
    Piece next(std::string_view text, size_t from, bool more);

   private:
    const Splitter& s_;
    void* match_data_ = nullptr;
    void* context_ = nullptr;
    void* jit_stack_ = nullptr;
    // A match found beyond `from` (the gap before it was returned first): [begin, end).
    size_t pending_begin_ = 0, pending_end_ = 0, pending_size_ = 0;
    const char* pending_text_ = nullptr;
  };

 private:
  std::string pattern_;
  void* code_ = nullptr;
  bool jit_ = false;
};

}  // namespace holmes::tokenizer
