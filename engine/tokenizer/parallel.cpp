#include "engine/tokenizer/parallel.hpp"

#include <algorithm>
#include <cstring>
#include <exception>
#include <string>
#include <stdexcept>
#include <thread>

namespace holmes::tokenizer {

ParallelEncoder::ParallelEncoder(const Tokenizer& t, bool allow_special, int threads, size_t min_chunk)
    : t_(t), min_chunk_(std::max<size_t>(min_chunk, 1)) {
  if (threads < 1) throw std::invalid_argument("ParallelEncoder: threads must be >= 1");
  for (int i = 0; i < threads; ++i) encoders_.push_back(t.encoder(allow_special));
}

ParallelEncoder::~ParallelEncoder() = default;

namespace {

// A cut near `target`: just after the next '\n' within 64 KiB, else the next UTF-8
// character start. Any cut is correct (the stitch repairs it); line starts rarely need it.
size_t cut_near(std::string_view text, size_t target) {
  const size_t limit = std::min(text.size(), target + 65536);
  const void* nl = std::memchr(text.data() + target, '\n', limit - target);
  if (nl) return static_cast<size_t>(static_cast<const char*>(nl) - text.data()) + 1;
  size_t p = target;
  while (p < text.size() && (static_cast<unsigned char>(text[p]) & 0xc0) == 0x80) ++p;
  return p;
}

}  // namespace

size_t ParallelEncoder::encode(std::string_view text, bool more, std::vector<uint32_t>* out) {
  if (!t_.splittable()) {
    if (more) throw std::logic_error("ParallelEncoder: this tokenizer encodes whole documents only");
    encoders_[0]->encode(text, out);
    return text.size();
  }
  const size_t n = std::clamp<size_t>(text.size() / min_chunk_, 1, encoders_.size());
  if (n == 1) return encoders_[0]->encode_range(text, 0, text.size(), more, out, nullptr);
  std::vector<Chunk> chunks(n);
  size_t begin = 0;
  for (size_t k = 0; k < n; ++k) {
    chunks[k].begin = begin;
    chunks[k].end = k + 1 == n ? text.size() : std::max(begin, cut_near(text, text.size() * (k + 1) / n));
    begin = chunks[k].end;
  }
  std::vector<std::exception_ptr> errors(n);
  std::vector<std::thread> pool;
  for (size_t k = 0; k < n; ++k)
    pool.emplace_back([&, k] {
      try {
        Chunk& c = chunks[k];
        c.reached = c.begin < c.end ? encoders_[k]->encode_range(text, c.begin, c.end, more, &c.tokens, &c.bounds)
                                    : c.begin;
      } catch (...) {
        errors[k] = std::current_exception();
      }
    });
  for (auto& th : pool) th.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  return stitch(text, more, chunks, out);
}

size_t ParallelEncoder::stitch(std::string_view text, bool more, std::vector<Chunk>& chunks,
                               std::vector<uint32_t>* out) {
  Encoder& seq = *encoders_[0];
  size_t pos = 0;  // where the true sequence of pieces has arrived
  for (Chunk& c : chunks) {
    if (c.begin == c.end) continue;
    // Re-cut pieces from `pos` (inside or at the end of an earlier chunk's last piece) until
    // the cut lands on a piece start of this chunk, or passes its last piece.
    while (pos > c.begin && pos < c.reached) {
      const auto it = std::lower_bound(c.bounds.begin(), c.bounds.end(), pos,
                                       [](const Boundary& b, size_t p) { return b.offset < p; });
      if (it != c.bounds.end() && it->offset == pos) {
        out->insert(out->end(), c.tokens.begin() + static_cast<std::ptrdiff_t>(it->tokens), c.tokens.end());
        pos = c.reached;
        break;
      }
      const size_t end = seq.encode_range(text, pos, pos + 1, more, out, nullptr);
      if (end == pos) return pos;  // the piece at pos waits for more text
      pos = end;
    }
    if (pos == c.begin) {
      out->insert(out->end(), c.tokens.begin(), c.tokens.end());
      pos = c.reached;
    }
    if (pos < c.end) return pos;  // stopped early for more text: nothing after counts
  }
  return pos;
}

void ParallelEncoder::encode_documents(std::span<const std::string_view> docs, std::vector<uint32_t>* out,
                                       std::vector<size_t>* ends) {
  ends->clear();
  ends->reserve(docs.size());
  size_t from = 0;
  for (size_t k = 0; k <= docs.size(); ++k) {
    if (k < docs.size() && docs[k].size() <= kLongDocument) continue;
    // docs[from, k) are short: one batch over the threads; then the long one at k alone.
    encode_short(docs.subspan(from, k - from), out, ends);
    if (k == docs.size()) break;
    encode(docs[k], false, out);
    ends->push_back(out->size());
    from = k + 1;
  }
}

void ParallelEncoder::encode_short(std::span<const std::string_view> docs, std::vector<uint32_t>* out,
                                   std::vector<size_t>* ends) {
  if (docs.empty()) return;
  size_t total = 0;
  for (const auto& d : docs) total += d.size();
  const size_t n = std::clamp<size_t>(total / min_chunk_, 1, std::min(encoders_.size(), docs.size()));
  // Runs of documents [first[k], first[k+1]) of about total / n bytes each.
  std::vector<size_t> first{0};
  size_t bytes = 0;
  for (size_t i = 0; i < docs.size() && first.size() < n; ++i) {
    bytes += docs[i].size();
    if (bytes >= total * first.size() / n) first.push_back(i + 1);
  }
  first.push_back(docs.size());
  struct Run {
    std::vector<uint32_t> tokens;
    std::vector<size_t> ends;
  };
  std::vector<Run> runs(first.size() - 1);
  std::vector<std::exception_ptr> errors(runs.size());
  auto encode_run = [&](size_t k) {
    try {
      for (size_t i = first[k]; i < first[k + 1]; ++i) {
        encoders_[k]->encode(docs[i], &runs[k].tokens);
        runs[k].ends.push_back(runs[k].tokens.size());
      }
    } catch (...) {
      errors[k] = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  for (size_t k = 1; k < runs.size(); ++k) pool.emplace_back(encode_run, k);
  encode_run(0);
  for (auto& th : pool) th.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  for (const Run& r : runs) {
    const size_t base = out->size();
    out->insert(out->end(), r.tokens.begin(), r.tokens.end());
    for (size_t e : r.ends) ends->push_back(base + e);
  }
}

void encode_document(ParallelEncoder& enc, const std::function<size_t(char* p, size_t n)>& read, size_t window,
                     const std::function<void(std::span<const uint32_t> tokens, size_t bytes)>& sink) {
  std::string buf;
  std::vector<uint32_t> tokens;
  size_t want = std::max<size_t>(window, 1);
  bool end = false;
  while (!end || !buf.empty()) {
    // Fill the buffer up to `want` bytes (the whole document when it cannot be split).
    while (!end && (buf.size() < want || !enc.splittable())) {
      const size_t have = buf.size();
      buf.resize(have + std::max<size_t>(want - std::min(want, have), 1 << 16));
      const size_t got = read(buf.data() + have, buf.size() - have);
      buf.resize(have + got);
      end = got == 0;
    }
    tokens.clear();
    const size_t used = enc.encode(buf, !end, &tokens);
    if (used > 0 || !tokens.empty()) sink(tokens, used);
    if (used == 0 && !end) want *= 2;  // one piece longer than the window: read more of it
    buf.erase(0, used);
    if (end && used == 0 && !buf.empty()) throw std::logic_error("encode_document: no progress at the end");
  }
}

}  // namespace holmes::tokenizer
