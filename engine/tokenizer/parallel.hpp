// Encoding one long document on several threads, in windows (bounded memory), with exactly
// the tokens of a single whole-text encode.
//
// A window is cut into one chunk per thread at line starts; each thread encodes the pieces
// that start in its chunk, reading the whole window so the split pattern sees what follows
// (lookahead, `$`). A thread's last piece may run past its chunk's end: then the next chunk
// started inside a piece, and the stitch re-cuts pieces from where the left chunk really
// ended until it lands on a piece start the right thread also found; from there on both
// agree (a piece depends only on where it starts: no split pattern looks behind). Across
// windows the encoder stops before pieces that the window's end could still change
// (Encoder::encode_range with `more`) and the caller hands the rest back with more text.
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <memory>
#include <string_view>
#include <vector>

#include "engine/tokenizer/tokenizer.hpp"

namespace holmes::tokenizer {

class ParallelEncoder {
 public:
  // threads >= 1; chunks smaller than min_chunk bytes are not worth a thread.
  ParallelEncoder(const Tokenizer& t, bool allow_special, int threads, size_t min_chunk = 256 * 1024);
  ~ParallelEncoder();

  // Appends the tokens of text's pieces and returns how many bytes of `text` they cover: all
  // of it when !more; with more (the document continues), the caller keeps text[returned..]
  // and calls again with it followed by more text. A splittable tokenizer is required when
  // more is true (SentencePiece encodes whole documents).
  size_t encode(std::string_view text, bool more, std::vector<uint32_t>* out);

  // Many whole documents (JSON Lines): each encoded alone, as encode(doc, false) would, spread
  // over the threads in contiguous runs of about equal bytes; a document of more than
  // kLongDocument bytes goes through encode() on its own, its pieces over every thread.
  // Appends every document's tokens to `out` in order; ends[k] = out->size() after document
  // k (ends is replaced).
  static constexpr size_t kLongDocument = size_t{1} << 20;
  void encode_documents(std::span<const std::string_view> docs, std::vector<uint32_t>* out, std::vector<size_t>* ends);

  int threads() const { return static_cast<int>(encoders_.size()); }
  bool splittable() const { return t_.splittable(); }

 private:
  struct Chunk {
    size_t begin = 0, end = 0;  // pieces starting in [begin, end)
    size_t reached = 0;         // end of the last piece encoded
    std::vector<uint32_t> tokens;
    std::vector<Boundary> bounds;
  };
  size_t stitch(std::string_view text, bool more, std::vector<Chunk>& chunks, std::vector<uint32_t>* out);
  // encode_documents over documents none of which is long.
  void encode_short(std::span<const std::string_view> docs, std::vector<uint32_t>* out, std::vector<size_t>* ends);

  const Tokenizer& t_;
  std::vector<std::unique_ptr<Encoder>> encoders_;
  size_t min_chunk_;
};

// Reads one document through `read` (fills up to `n` bytes at `p`, returns how many; 0 at the
// end) and encodes it in windows of about `window` bytes: `sink` gets the tokens in order
// with the bytes of text they cover. Memory stays near `window` bytes of text and their
// tokens (a single piece longer than the window grows it: a piece is encoded whole). A
// tokenizer that is not splittable reads the whole document first.
void encode_document(ParallelEncoder& enc, const std::function<size_t(char* p, size_t n)>& read, size_t window,
                     const std::function<void(std::span<const uint32_t> tokens, size_t bytes)>& sink);

}  // namespace holmes::tokenizer
