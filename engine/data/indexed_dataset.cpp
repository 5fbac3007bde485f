#include "engine/data/indexed_dataset.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string_view>

#include "common/errors.hpp"

namespace holmes::data {

namespace fs = std::filesystem;

std::optional<TokenType> indexed_token_type(int code) {
  switch (code) {
    case 1: return TokenType::kUint8;
    case 2: return TokenType::kInt8;
    case 3: return TokenType::kInt16;
    case 4: return TokenType::kInt32;
    case 5: return TokenType::kInt64;
    case 8: return TokenType::kUint16;
    default: return std::nullopt;
  }
}

std::string indexed_dtype_name(int code) {
  static constexpr std::array<const char*, 9> kNames = {"", "uint8", "int8", "int16", "int32",
                                                         "int64", "float64", "float32", "uint16"};
  if (code < 1 || code > 8) return fmt::format("unknown code {}", code);
  return fmt::format("{} (code {})", kNames[static_cast<size_t>(code)], code);
}

namespace {

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

bool is_file(const std::string& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

}  // namespace

std::string indexed_prefix(const std::string& out) {
  if (ends_with(out, ".idx") || ends_with(out, ".bin")) return out.substr(0, out.size() - 4);
  return out;
}

std::optional<IndexedFiles> indexed_dataset_files(const std::string& path) {
  std::string prefix = path;
  if (ends_with(path, ".idx") || ends_with(path, ".bin")) prefix = path.substr(0, path.size() - 4);
  else if (is_file(path)) return std::nullopt;  // a file of its own (llm.c, raw), not a prefix
  IndexedFiles f{prefix + ".bin", prefix + ".idx"};
  if (is_file(f.bin) && is_file(f.idx)) return f;
  return std::nullopt;
}

int64_t IndexedIndex::document_start(uint64_t d) const {
  const int64_t seq = document(d);
  return static_cast<uint64_t>(seq) == sequences ? static_cast<int64_t>(tokens)
                                                  : pointer(static_cast<uint64_t>(seq)) / token_type_bytes(type);
}

IndexedIndex parse_indexed_index(const std::string& path, const unsigned char* bytes, size_t size,
                                 uint64_t bin_bytes) {
  auto fail = [&](const std::string& what) {
    return UserError(fmt::format("{}: not a readable Megatron index: {}", path, what));
  };
  if (size < kIndexHeaderBytes)
    throw fail(fmt::format("{} bytes, shorter than the {}-byte header", size, kIndexHeaderBytes));
  if (std::memcmp(bytes, kIndexMagic, sizeof(kIndexMagic)) != 0)
    throw fail("it does not start with MMIDIDX\\0\\0 (an index of Megatron's older 'cached' or 'lazy' format, or not "
               "an index at all)");
  uint64_t version = 0, s = 0, d = 0;
  std::memcpy(&version, bytes + 9, 8);
  const int code = bytes[17];
  std::memcpy(&s, bytes + 18, 8);
  std::memcpy(&d, bytes + 26, 8);
  if (version != kIndexVersion) throw fail(fmt::format("version {}; accepted: {}", version, kIndexVersion));
  const auto type = indexed_token_type(code);
  if (!type)
    throw fail(fmt::format("its ids are {}; accepted: the integer dtypes uint8 (1), int8 (2), int16 (3), int32 (4), "
                           "int64 (5), uint16 (8): token ids are integers", indexed_dtype_name(code)));
  // Bounds before multiplying: the counts come from the file.
  const uint64_t room = size - kIndexHeaderBytes;
  if (s > room / 12 || d > room / 8 || 12 * s + 8 * d > room)
    throw fail(fmt::format("its counts ({} sequences, {} document indices) need more bytes after the header than "
                           "the file's {}", s, d, room));
  const uint64_t extra = room - 12 * s - 8 * d;
  if (extra != 0 && extra != s)  // s bytes more: a multimodal index's sequence modes
    throw fail(fmt::format("{} bytes after the document indices (expected 0, or {} sequence modes)", extra, s));
  IndexedIndex ix;
  ix.type = *type;
  ix.dtype_code = code;
  ix.sequences = s;
  ix.document_indices = d;
  ix.lengths = bytes + kIndexHeaderBytes;
  ix.pointers = bytes + kIndexHeaderBytes + 4 * s;
  ix.documents = bytes + kIndexHeaderBytes + 12 * s;
  const int width = token_type_bytes(*type);
  uint64_t at = 0;
  for (uint64_t i = 0; i < s; ++i) {
    const int32_t len = ix.length(i);
    if (len < 0) throw fail(fmt::format("sequence {} has length {}", i, len));
    if (static_cast<uint64_t>(ix.pointer(i)) != at * width)
      throw fail(fmt::format("sequence {} starts at byte {} of the .bin, not right after sequence {} (byte {}); "
                             "accepted: sequences stored one after another, as Megatron's builder writes them",
                             i, ix.pointer(i), i == 0 ? 0 : i - 1, at * width));
    at += static_cast<uint64_t>(len);
  }
  ix.tokens = at;
  if (at * width != bin_bytes)
    throw fail(fmt::format("its {} sequences hold {} ids of {} byte(s), {} bytes, but the .bin has {} bytes", s, at,
                           width, at * width, bin_bytes));
  if (d == 0 || ix.document(0) != 0 || static_cast<uint64_t>(ix.document(d - 1)) != s)
    throw fail(fmt::format("the document indices must run from 0 to the sequence count {} (they {})", s,
                           d == 0 ? std::string("are empty")
                                  : fmt::format("run from {} to {}", ix.document(0), ix.document(d - 1))));
  for (uint64_t i = 1; i < d; ++i)
    if (ix.document(i) < ix.document(i - 1))
      throw fail(fmt::format("document index {} ({}) is below the one before it ({})", i, ix.document(i),
                             ix.document(i - 1)));
  return ix;
}

IndexedWriter::IndexedWriter(const std::string& prefix, uint32_t id_count)
    : prefix_(prefix), width_(id_count > 65536 ? 4 : 2) {
  const std::string tag = fmt::format(".tmp-{}", ::getpid());
  bin_tmp_ = prefix_ + ".bin" + tag;
  idx_tmp_ = prefix_ + ".idx" + tag;
  len_tmp_ = prefix_ + ".lengths" + tag;
  bin_ = std::fopen(bin_tmp_.c_str(), "wb");
  lengths_ = bin_ ? std::fopen(len_tmp_.c_str(), "w+b") : nullptr;
  if (!bin_ || !lengths_) {
    const int err = errno;
    if (bin_) std::fclose(bin_), std::remove(bin_tmp_.c_str());
    bin_ = nullptr;
    throw UserError(fmt::format("{}.bin: cannot create the Megatron dataset: {}", prefix_, std::strerror(err)));
  }
}

IndexedWriter::~IndexedWriter() {
  for (std::FILE* f : {bin_, lengths_})
    if (f) std::fclose(f);
  for (const std::string& p : {bin_tmp_, idx_tmp_, len_tmp_}) std::remove(p.c_str());
}

std::string IndexedWriter::described() const {
  return fmt::format("{}.bin + {}.idx (Megatron indexed dataset, {} ids, {} documents)", prefix_, prefix_,
                     width_ == 2 ? "uint16" : "int32", sequences_);
}

void IndexedWriter::end_sequence() {
  if (!open_sequence_) return;
  const int64_t len = count_ - sequence_start_;
  if (len > INT32_MAX)
    throw UserError(fmt::format("{}.idx: a document of {} tokens does not fit the index's int32 length", prefix_, len));
  const int32_t n = static_cast<int32_t>(len);
  if (std::fwrite(&n, sizeof(n), 1, lengths_) != 1)
    throw UserError(fmt::format("{}: writing the sequence lengths failed: {}", len_tmp_, std::strerror(errno)));
  ++sequences_;
  open_sequence_ = false;
}

void IndexedWriter::begin_document() {
  end_sequence();
  open_sequence_ = true;
  sequence_start_ = count_;
}

void IndexedWriter::append(std::span<const uint32_t> tokens) {
  size_t wrote;
  if (width_ == 2) {
    narrow_.assign(tokens.begin(), tokens.end());
    wrote = std::fwrite(narrow_.data(), 2, narrow_.size(), bin_);
  } else {
    wide_.assign(tokens.begin(), tokens.end());  // ids < 2^31: a tokenizer has fewer
    wrote = std::fwrite(wide_.data(), 4, wide_.size(), bin_);
  }
  if (wrote != tokens.size())
    throw UserError(fmt::format("{}: writing the Megatron dataset failed: {}", bin_tmp_, std::strerror(errno)));
  count_ += static_cast<int64_t>(tokens.size());
}

void IndexedWriter::commit() {
  end_sequence();
  auto fail = [&](const std::string& what) {
    return UserError(fmt::format("{}: writing the Megatron dataset failed: {}: {}", prefix_, what,
                                 std::strerror(errno)));
  };
  if (std::fflush(bin_) != 0 || ::fsync(::fileno(bin_)) != 0) throw fail("the .bin");
  std::FILE* idx = std::fopen(idx_tmp_.c_str(), "wb");
  if (!idx) throw fail("creating the .idx");
  bool ok = std::fwrite(kIndexMagic, 1, sizeof(kIndexMagic), idx) == sizeof(kIndexMagic);
  const uint64_t version = kIndexVersion, s = sequences_, d = sequences_ + 1;
  const uint8_t code = width_ == 2 ? 8 : 4;
  ok = ok && std::fwrite(&version, 8, 1, idx) == 1 && std::fwrite(&code, 1, 1, idx) == 1 &&
       std::fwrite(&s, 8, 1, idx) == 1 && std::fwrite(&d, 8, 1, idx) == 1;
  // Three passes over the spilled lengths: the lengths, the byte pointers, then the document
  // indices 0..S (one sequence per document), in blocks.
  std::vector<int32_t> block(1 << 16);
  std::vector<int64_t> wide(block.size());
  for (int pass = 0; pass < 2 && ok; ++pass) {
    ok = std::fflush(lengths_) == 0 && std::fseek(lengths_, 0, SEEK_SET) == 0;
    int64_t at = 0;
    for (size_t got; ok && (got = std::fread(block.data(), 4, block.size(), lengths_)) > 0;) {
      if (pass == 0) {
        ok = std::fwrite(block.data(), 4, got, idx) == got;
        continue;
      }
      for (size_t i = 0; i < got; ++i) wide[i] = at, at += static_cast<int64_t>(block[i]) * width_;
      ok = std::fwrite(wide.data(), 8, got, idx) == got;
    }
  }
  for (uint64_t i = 0; ok && i < d;) {
    size_t n = 0;
    for (; n < wide.size() && i < d; ++n, ++i) wide[n] = static_cast<int64_t>(i);
    ok = std::fwrite(wide.data(), 8, n, idx) == n;
  }
  ok = ok && std::fflush(idx) == 0 && ::fsync(::fileno(idx)) == 0;
  ok = std::fclose(idx) == 0 && ok;
  if (!ok) throw fail("the .idx");
  std::fclose(bin_);
  bin_ = nullptr;
  // The .bin first: a reader finds the pair only once the .idx, renamed last, is there.
  if (std::rename(bin_tmp_.c_str(), (prefix_ + ".bin").c_str()) != 0 ||
      std::rename(idx_tmp_.c_str(), (prefix_ + ".idx").c_str()) != 0)
    throw fail("renaming into place");
}

}  // namespace holmes::data
