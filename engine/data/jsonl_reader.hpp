// JSON Lines as pretraining corpora come (FineWeb, DCLM, The Pile, Dolma exports): one JSON
// object per line, the document's text under one key (`text` by default). Lines are parsed
// one at a time with simdjson (Debian's libsimdjson), so memory holds one block of input and
// the longest line, never the file. A line that is not an object with a string under the key
// is not a document: next() returns it with what is wrong, and the caller decides (skip and
// count, up to a limit). Blank lines are skipped; a UTF-8 byte-order mark before the first
// line is ignored.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/data/input_stream.hpp"

namespace holmes::data {

class JsonlReader {
 public:
  // `in` outlives the reader; `path` names the file in problems.
  JsonlReader(InputStream& in, std::string path, std::string text_key);
  ~JsonlReader();
  JsonlReader(const JsonlReader&) = delete;
  JsonlReader& operator=(const JsonlReader&) = delete;

  struct Line {
    int64_t number = 0;     // 1-based line number in the (decompressed) file
    std::string_view text;  // the document's text (unescaped); valid until the next call
    std::string problem;    // "" for a document; else why the line is not one
  };
  // The next non-blank line; false at the end of the input. UserError when the input cannot
  // be read (InputStream's errors).
  bool next(Line* line);

 private:
  bool next_raw(std::string_view* raw);  // the next line's bytes without its '\n'
  std::string problem_of(const std::string_view raw, std::string_view* text);

  InputStream& in_;
  std::string path_, key_;
  std::vector<char> buf_;     // [begin_, end_) unread bytes, padded for simdjson
  size_t begin_ = 0, end_ = 0;
  bool eof_ = false;
  int64_t line_ = 0;
  struct Parser;
  std::unique_ptr<Parser> parser_;
};

}  // namespace holmes::data
