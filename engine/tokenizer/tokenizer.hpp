// A tokenizer: text <-> token ids. Implementations: byte-level BPE (bpe_tokenizer.hpp: tiktoken
// rank files, GPT-2 vocab.json + merges.txt, Hugging Face tokenizer.json), SentencePiece
// models (Llama 2, Mistral; through libsentencepiece) and the 257-id byte tokenizer of the
// synthetic data. load.hpp turns a user's --tokenizer SPEC into one.
//
// Special tokens (<|endoftext|>, <s>, ...) are produced from text only by an encoder made
// with allow_special: otherwise their spelling in a document is ordinary text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace holmes::tokenizer {

struct SpecialToken {
  std::string text;
  uint32_t id = 0;
};

// Where a piece of the text starts in an encoding: byte offset and the tokens before it.
struct Boundary {
  size_t offset = 0;
  size_t tokens = 0;
};

// One thread's encoder (owns scratch buffers and caches; not shared between threads).
class Encoder {
 public:
  virtual ~Encoder() = default;
  // Appends the tokens of the whole of `text` (one document, or part of one that ends here).
  virtual void encode(std::string_view text, std::vector<uint32_t>* out) = 0;
  // Streaming and threads (parallel.hpp): encodes the pieces of text that start in
  // [from, stop) and returns the end of the last one (>= stop, the whole piece is encoded),
  // or less when `more` (text continues past text.size()) and a piece near the end could
  // still change: the caller then comes back with more text from that offset. Appends to
  // `bounds` the start of every piece, `tokens` counted in `out` (whose size it does not reset).
  // Only when splittable().
  virtual size_t encode_range(std::string_view text, size_t from, size_t stop, bool more, std::vector<uint32_t>* out,
                              std::vector<Boundary>* bounds) = 0;
};

// Where a tokenizer was read from, so it can be copied and read again (saved.hpp): the spec
// that loads the copy is `prefix` + the copy folder + "/" + `entry` ("." = the folder).
struct TokenizerSource {
  std::string prefix;               // "cl100k_base:" for built-in encodings; "" otherwise
  std::vector<std::string> files;   // the files read (none for "bytes")
  std::string entry;                // the file the spec names, "." for a folder, or "bytes"
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // One past the largest id (regular and special tokens); a model needs vocab_size >= this.
  virtual uint32_t id_count() const = 0;
  // The token put before every document (end-of-text or begin-of-text).
  virtual uint32_t document_token() const = 0;
  virtual const std::vector<SpecialToken>& specials() const = 0;
  virtual std::unique_ptr<Encoder> encoder(bool allow_special) const = 0;
  // Bytes of the tokens; a special token decodes to its text. Ids that are no token decode
  // to U+FFFD.
  virtual std::string decode(std::span<const uint32_t> ids) const = 0;
  // Encoders cut any text into independent pieces (encode_range works): BPE and bytes.
  // SentencePiece encodes a document in one call.
  virtual bool splittable() const = 0;
  // Stable across builds and machines; two tokenizers with equal hashes encode alike.
  virtual uint64_t hash() const = 0;
  // "cl100k_base", "tokenizer.json (BPE)", "sentencepiece tokenizer.model", "bytes".
  virtual std::string name() const = 0;

  // Convenience: one encoder for the call.
  std::vector<uint32_t> encode(std::string_view text, bool allow_special = false) const;
  std::string describe() const;  // name, ids, document token, hash: one line for logs
  std::string token_text(uint32_t id) const;

  const TokenizerSource& source() const { return source_; }
  void set_source(TokenizerSource s) { source_ = std::move(s); }

 private:
  TokenizerSource source_;
};

std::string hash_hex(uint64_t h);

}  // namespace holmes::tokenizer
