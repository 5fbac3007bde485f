#define PCRE2_CODE_UNIT_WIDTH 8
#include "engine/tokenizer/splitter.hpp"

#include <fmt/format.h>
#include <pcre2.h>

#include <stdexcept>

namespace holmes::tokenizer {

namespace {

// Unicode White_Space (PropList.txt), the meaning of `\s` in Rust's regex.
constexpr std::string_view kWhiteSpace =
    "\\x{9}-\\x{D}\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

pcre2_code* code_of(void* p) { return static_cast<pcre2_code*>(p); }

}  // namespace

std::string translate_pattern(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 64);
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\') {
      if (i + 1 >= p.size()) throw std::invalid_argument("the pattern ends with a lone backslash");
      const char e = p[++i];
      if (e == 's')
        out += in_class ? std::string(kWhiteSpace) : fmt::format("[{}]", kWhiteSpace);
      else if (e == 'S' && !in_class)
        out += fmt::format("[^{}]", kWhiteSpace);
      else
        out += {c, e};  // \S inside a class stays PCRE2's (see splitter.hpp)
      continue;
    }
    out += c;
    if (!in_class && c == '[') {
      in_class = true;
      // A ']' first in the class (after an optional '^') is a literal.
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];
    } else if (in_class && c == '[' && i + 1 < p.size() && p[i + 1] == ':') {
      const size_t close = p.find(":]", i + 2);  // a POSIX class such as [:alpha:]
      if (close == std::string_view::npos) throw std::invalid_argument("unterminated [: in the pattern");
      out.append(p.substr(i + 1, close + 1 - i));
      i = close + 1;
    } else if (in_class && c == ']') {
      in_class = false;
    }
  }
  if (in_class) throw std::invalid_argument("the pattern has an unterminated character class");
  return out;
}

Splitter::Splitter(std::string_view pattern) : pattern_(pattern) {
  const std::string translated = translate_pattern(pattern);
  int err = 0;
  PCRE2_SIZE offset = 0;
  const uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(), options, &err,
                                   &offset, nullptr);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    throw std::invalid_argument(fmt::format("the split pattern does not compile (PCRE2: {} at offset {} of the "
                                            "pattern as compiled)", reinterpret_cast<const char*>(msg), offset));
  }
  code_ = code;
  jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE | PCRE2_JIT_PARTIAL_HARD) == 0;
}

Splitter::~Splitter() { pcre2_code_free(code_of(code_)); }

Splitter::Cursor::Cursor(const Splitter& s) : s_(s) {
  match_data_ = pcre2_match_data_create_from_pattern(code_of(s.code_), nullptr);
  auto* ctx = pcre2_match_context_create(nullptr);
  context_ = ctx;
  if (s.jit_) {
    // Long runs (a million spaces) can need more than the default 32 KiB of JIT stack.
    auto* stack = pcre2_jit_stack_create(64 * 1024, 64 * 1024 * 1024, nullptr);
    jit_stack_ = stack;
    pcre2_jit_stack_assign(ctx, nullptr, stack);
  }
  if (!match_data_ || !ctx) throw std::bad_alloc();
}

Splitter::Cursor::~Cursor() {
  pcre2_match_data_free(static_cast<pcre2_match_data*>(match_data_));
  pcre2_match_context_free(static_cast<pcre2_match_context*>(context_));
  if (jit_stack_) pcre2_jit_stack_free(static_cast<pcre2_jit_stack*>(jit_stack_));
}

Splitter::Cursor::Piece Splitter::Cursor::next(std::string_view text, size_t from, bool more) {
  if (pending_text_ == text.data() && pending_size_ == text.size() && pending_begin_ == from) {
    pending_text_ = nullptr;
    return {pending_end_, false};
  }
  pending_text_ = nullptr;
  auto* md = static_cast<pcre2_match_data*>(match_data_);
  const uint32_t options = PCRE2_NOTEMPTY | (more ? PCRE2_PARTIAL_HARD : 0);
  const int rc = pcre2_match(code_of(s_.code_), reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), from, options,
                             md, static_cast<pcre2_match_context*>(context_));
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
  if (rc == PCRE2_ERROR_NOMATCH) return {text.size(), more};  // the rest is one stretch no pattern covers
  if (rc == PCRE2_ERROR_PARTIAL) {
    // Positions before the partial match failed without reaching the end: a final stretch.
    if (ov[0] > from) return {ov[0], false};
    return {text.size(), true};
  }
  if (rc < 0) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(rc, msg, sizeof(msg));
    throw std::runtime_error(fmt::format("split pattern: matching failed at byte {}: {}", from,
                                         reinterpret_cast<const char*>(msg)));
  }
  if (ov[0] > from) {  // a stretch no alternative matches, then the match
    pending_text_ = text.data();
    pending_size_ = text.size();
    pending_begin_ = ov[0];
    pending_end_ = ov[1];
    return {ov[0], false};
  }
  return {ov[1], false};
}

}  // namespace holmes::tokenizer
