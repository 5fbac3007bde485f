#include "engine/data/jsonl_reader.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <simdjson.h>

#include <algorithm>
#include <cstring>

namespace holmes::data {

namespace {

constexpr size_t kBlock = size_t{4} << 20;  // bytes read at a time
constexpr size_t kShownKeys = 8;            // keys a missing-key problem lists

// A JSON value's kind as a user reads it.
const char* kind_name(simdjson::dom::element_type t) {
  using T = simdjson::dom::element_type;
  switch (t) {
    case T::ARRAY: return "an array";
    case T::OBJECT: return "an object";
    case T::INT64:
    case T::UINT64:
    case T::DOUBLE: return "a number";
    case T::STRING: return "a string";
    case T::BOOL: return "a boolean";
    case T::NULL_VALUE: return "null";
  }
  return "a value";
}

bool blank(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == ' ' || c == '\t' || c == '\r'; });
}

}  // namespace

struct JsonlReader::Parser {
  simdjson::dom::parser dom;
};

JsonlReader::JsonlReader(InputStream& in, std::string path, std::string text_key)
    : in_(in), path_(std::move(path)), key_(std::move(text_key)), parser_(std::make_unique<Parser>()) {
  buf_.resize(kBlock + simdjson::SIMDJSON_PADDING);
}

JsonlReader::~JsonlReader() = default;

bool JsonlReader::next_raw(std::string_view* raw) {
  for (;;) {
    const void* nl = std::memchr(buf_.data() + begin_, '\n', end_ - begin_);
    if (nl || (eof_ && end_ > begin_)) {
      const size_t stop = nl ? static_cast<size_t>(static_cast<const char*>(nl) - buf_.data()) : end_;
      *raw = std::string_view(buf_.data() + begin_, stop - begin_);
      begin_ = nl ? stop + 1 : stop;
      ++line_;
      return true;
    }
    if (eof_) return false;
    // Keep the unread part at the front; grow when a line fills the whole buffer.
    if (begin_ > 0) {
      std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    const size_t room = buf_.size() - simdjson::SIMDJSON_PADDING;
    if (end_ == room) buf_.resize(room * 2 + simdjson::SIMDJSON_PADDING);
    const size_t want = buf_.size() - simdjson::SIMDJSON_PADDING - end_;
    const size_t got = in_.read(buf_.data() + end_, want);
    end_ += got;
    eof_ = got == 0;
  }
}

std::string JsonlReader::problem_of(std::string_view raw, std::string_view* text) {
  // raw lies inside buf_, which has SIMDJSON_PADDING readable bytes after any line.
  simdjson::dom::element doc;
  if (const auto err = parser_->dom.parse(raw.data(), raw.size(), false).get(doc); err)
    return fmt::format("not valid JSON ({})", simdjson::error_message(err));
  simdjson::dom::object obj;
  if (doc.get(obj) != simdjson::SUCCESS)
    return fmt::format("{}, not a JSON object with the text under '{}'", kind_name(doc.type()), key_);
  simdjson::dom::element value;
  if (obj.at_key(key_).get(value) != simdjson::SUCCESS) {
    std::vector<std::string> keys;
    for (const auto field : obj) {
      if (keys.size() == kShownKeys) {
        keys.emplace_back("...");
        break;
      }
      keys.emplace_back(field.key);
    }
    return fmt::format("no key '{}' (the object has {}; choose the text's key with --text-key)", key_,
                       keys.empty() ? std::string("no keys") : fmt::format("{}", fmt::join(keys, ", ")));
  }
  if (value.get(*text) != simdjson::SUCCESS)
    return fmt::format("'{}' is {}, not a string", key_, kind_name(value.type()));
  return "";
}

bool JsonlReader::next(Line* line) {
  std::string_view raw;
  do {
    if (!next_raw(&raw)) return false;
    if (line_ == 1 && raw.size() >= 3 && std::memcmp(raw.data(), "\xef\xbb\xbf", 3) == 0) raw.remove_prefix(3);
  } while (blank(raw));
  line->number = line_;
  line->text = {};
  line->problem = problem_of(raw, &line->text);
  return true;
}

}  // namespace holmes::data
