#include "engine/data/token_file.hpp"

#include <fcntl.h>
#include <fmt/ranges.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <utility>

#include "engine/data/file_kind.hpp"
#include "common/errors.hpp"
#include "engine/tokenizer/saved.hpp"

namespace holmes::data {

TokenFormat parse_token_format(const std::string& text, const std::string& key) {
  if (const auto f = spec::parse_choice<TokenFormat>(text)) return *f;
  throw UserError(fmt::format("{}: unknown token file format '{}' (accepted: {})", key, text,
                              fmt::join(spec::choice_names<TokenFormat>(), ", ")));
}

const char* token_format_name(TokenFormat format) {
  switch (format) {
    case TokenFormat::kAuto: return "auto";
    case TokenFormat::kLlmc: return "llmc";
    case TokenFormat::kRawUint16: return "raw-uint16";
    case TokenFormat::kMegatron: return "megatron";
  }
  return "?";
}

namespace {

// "" when every token is < vocab_size, else the first bad one and the accepted ids.
std::string token_range_problem(TokenSpan tokens, int vocab_size) {
  // One pass for the extremes (vectorises); the slow search for the position runs only on failure.
  if (tokens.empty() || (tokens.max() < vocab_size && tokens.min() >= 0)) return "";
  size_t i = 0;
  while (tokens.at(i) >= 0 && tokens.at(i) < vocab_size) ++i;
  return fmt::format("token id {} at position {} is outside the vocabulary (model.vocab_size = {}, so ids 0..{} "
                     "are accepted)", tokens.at(i), i, vocab_size, vocab_size - 1);
}

std::string odd_size_problem(size_t size) {
  return size % 2 == 0 ? "" : fmt::format("the file has an odd size ({} bytes); a raw file is an array of uint16 "
                                          "tokens (nanoGPT's .bin)", size);
}

// Why the file is not llm.c's although format auto was asked to read it: its first int32 is
// not the magic number. When the rest of the header has llm.c's layout (a known version and
// the token count the file's size implies) it is most likely a damaged llm.c file; say so.
std::string llmc_header_problem(const unsigned char* bytes, size_t size) {
  if (size < sizeof(int32_t))
    return fmt::format("the file has {} bytes, too short for llm.c's {}-byte header", size, kLlmcHeaderBytes);
  std::array<int32_t, 3> h{};
  std::memcpy(h.data(), bytes, std::min(size, sizeof(h)));
  std::string msg = fmt::format("the header is not llm.c's: it starts with {}, llm.c token files start with the "
                                "magic number {}", h[0], kLlmcMagic);
  const bool layout = size >= kLlmcHeaderBytes && (h[1] == kLlmcVersion || h[1] == kLlmc32Version) && h[2] >= 0 &&
                      size == kLlmcHeaderBytes + static_cast<size_t>(h[2]) * (h[1] == kLlmcVersion ? 2 : 4);
  if (layout)
    msg += fmt::format(", although the rest of the header has llm.c's layout (version {}, {} tokens, as the file's "
                       "size implies): a damaged llm.c file?", h[1], h[2]);
  return msg;
}

// Format auto: llm.c when the file starts with its magic number; else raw uint16 when the
// bytes read as tokens of the vocabulary; else neither, and the error says what each saw.
TokenFormat detect_format(const std::string& path, const unsigned char* bytes, size_t size, int vocab_size) {
  int32_t first = 0;
  if (size >= sizeof(int32_t)) std::memcpy(&first, bytes, sizeof(first));
  if (size >= sizeof(int32_t) && (first == kLlmcMagic || first == kLlmc32Magic)) return TokenFormat::kLlmc;
  refuse_non_token_file(path, bytes, size);  // text and the like pass for raw uint16
  std::string raw = odd_size_problem(size);
  if (raw.empty())
    raw = token_range_problem(std::span<const uint16_t>(reinterpret_cast<const uint16_t*>(bytes), size / 2),
                              vocab_size);
  if (raw.empty()) return TokenFormat::kRawUint16;
  throw UserError(fmt::format("{}: format auto recognises no token format in this file; tried llmc: {}; tried "
                              "raw-uint16: {}. Accepted: an llm.c token file, a raw uint16 array of token ids "
                              "below {} (name the format, llmc or raw-uint16, to read it as one), or a Megatron dataset "
                              "(PREFIX.bin beside PREFIX.idx)",
                              path, llmc_header_problem(bytes, size), raw, vocab_size));
}

}  // namespace

void check_token_range(TokenSpan tokens, int vocab_size, const std::string& what) {
  if (auto problem = token_range_problem(tokens, vocab_size); !problem.empty())
    throw UserError(fmt::format("{}: {}; was the file made with another tokenizer?", what, problem));
}

namespace {

struct Located {
  size_t offset = 0, count = 0;
  int width = 2;  // bytes per token
};

// Interprets the mapped bytes in `format` (auto resolved by the caller).
Located locate_tokens(const std::string& path, const unsigned char* bytes, size_t size, TokenFormat format) {
  if (format == TokenFormat::kRawUint16) {
    if (auto problem = odd_size_problem(size); !problem.empty())
      throw UserError(fmt::format("{}: raw uint16 token file: {}. Truncated?", path, problem));
    return {0, size / 2, 2};
  }
  if (size < kLlmcHeaderBytes)
    throw UserError(fmt::format("{}: truncated llm.c token file: {} bytes, shorter than the {}-byte header",
                                path, size, kLlmcHeaderBytes));
  std::array<int32_t, 3> h{};
  std::memcpy(h.data(), bytes, sizeof(h));
  if (h[0] != kLlmcMagic && h[0] != kLlmc32Magic)
    throw UserError(fmt::format("{}: bad magic number {} in the header (llm.c token files start with {}, or {} for "
                                "32-bit tokens); use data.format: raw-uint16 for a headerless file", path, h[0],
                                kLlmcMagic, kLlmc32Magic));
  const int width = h[0] == kLlmcMagic ? 2 : 4;
  if (h[1] != (width == 2 ? kLlmcVersion : kLlmc32Version))
    throw UserError(fmt::format("{}: token file version {} is not supported with magic {} (accepted: magic {} version "
                                "{} = uint16 tokens, magic {} version {} = uint32 tokens)", path, h[1], h[0],
                                kLlmcMagic, kLlmcVersion, kLlmc32Magic, kLlmc32Version));
  if (h[2] < 0)
    throw UserError(fmt::format("{}: the header's token count is {}; accepted: a count >= 0", path, h[2]));
  size_t count = static_cast<size_t>(h[2]);
  size_t want = kLlmcHeaderBytes + width * count;
  if (size < want)
    throw UserError(fmt::format("{}: truncated token file: the header says {} tokens ({} bytes with the header) "
                                "but the file has {} bytes", path, count, want, size));
  if (size > want)
    throw UserError(fmt::format("{}: token file has {} bytes after the {} tokens its header announces; "
                                "the header count is wrong or the file is not an llm.c token file",
                                path, size - want, count));
  return {kLlmcHeaderBytes, count, width};
}

std::optional<TokenizerStamp> read_stamp(const unsigned char* bytes, size_t size) {
  if (size < kLlmcHeaderBytes) return std::nullopt;
  std::array<int32_t, 7> h{};
  std::memcpy(h.data(), bytes, sizeof(h));
  if (h[3] != kTokenizerStampTag) return std::nullopt;
  return TokenizerStamp{static_cast<uint64_t>(static_cast<uint32_t>(h[4])) |
                            (static_cast<uint64_t>(static_cast<uint32_t>(h[5])) << 32),
                        static_cast<uint32_t>(h[6])};
}

}  // namespace

namespace {

// Maps `path` read-only (nullptr for an empty file); *bytes gets its size. UserError naming it.
void* map_file(const std::string& path, size_t* bytes, const char* what) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw UserError(fmt::format("{}: cannot open {}: {}", path, what, std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw UserError(fmt::format("{}: not a regular file", path));
  }
  *bytes = static_cast<size_t>(st.st_size);
  void* p = nullptr;
  if (*bytes > 0) {
    p = ::mmap(nullptr, *bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      throw UserError(fmt::format("{}: cannot memory-map {}: {}", path, what, std::strerror(err)));
    }
  }
  ::close(fd);  // the mapping keeps the file alive
  return p;
}

}  // namespace

TokenFile TokenFile::open_indexed(const IndexedFiles& files, int vocab_size) {
  TokenFile f;
  f.path_ = files.bin;
  f.format_ = TokenFormat::kMegatron;
  f.idx_map_ = map_file(files.idx, &f.idx_bytes_, "the Megatron index");
  f.map_ = map_file(files.bin, &f.map_bytes_, "the Megatron data file");
  f.index_ = parse_indexed_index(files.idx, static_cast<const unsigned char*>(f.idx_map_), f.idx_bytes_, f.map_bytes_);
  if (f.index_->tokens == 0) throw UserError(fmt::format("{}: the Megatron dataset holds no tokens", files.bin));
  f.tokens_ = TokenSpan(f.map_, f.index_->tokens, f.index_->type);
  // Megatron's files have no room for a stamp: the tokenizer prepare-data saved beside them names it.
  const std::string sidecar = files.bin + ".tokenizer";
  if (tokenizer::is_saved_tokenizer(sidecar)) {
    const auto info = tokenizer::read_saved_info(sidecar);
    f.stamp_ = TokenizerStamp{info.hash, info.ids};
    if (info.ids > static_cast<uint32_t>(vocab_size))
      throw UserError(fmt::format("{}: made with a tokenizer of {} ids ({}), more than the model's vocabulary of {} "
                                  "(model.vocab_size); accepted: model.vocab_size >= {}", files.bin, info.ids, sidecar,
                                  vocab_size, info.ids));
  }
  check_token_range(f.tokens_, vocab_size, files.bin);
  return f;
}

TokenFile TokenFile::open(const std::string& path, TokenFormat format, int vocab_size) {
  if (format == TokenFormat::kMegatron || format == TokenFormat::kAuto) {
    if (const auto files = indexed_dataset_files(path)) return open_indexed(*files, vocab_size);
    if (format == TokenFormat::kMegatron)
      throw UserError(fmt::format("{}: no Megatron dataset here: data.format megatron needs PREFIX.bin and PREFIX.idx "
                                  "(name the prefix, its .bin or its .idx)", path));
  }
  TokenFile f;
  f.path_ = path;
  f.map_ = map_file(path, &f.map_bytes_, "the token file");
  auto* bytes = static_cast<const unsigned char*>(f.map_);
  if (format == TokenFormat::kRawUint16) refuse_non_token_file(path, bytes, f.map_bytes_);
  f.format_ = format == TokenFormat::kAuto ? detect_format(path, bytes, f.map_bytes_, vocab_size) : format;
  const Located at = locate_tokens(path, bytes, f.map_bytes_, f.format_);
  if (at.count == 0) throw UserError(fmt::format("{}: token file holds no tokens", path));
  if (at.width == 2)
    f.tokens_ = std::span<const uint16_t>(reinterpret_cast<const uint16_t*>(bytes + at.offset), at.count);
  else
    f.tokens_ = std::span<const uint32_t>(reinterpret_cast<const uint32_t*>(bytes + at.offset), at.count);
  if (f.format_ == TokenFormat::kLlmc) f.stamp_ = read_stamp(bytes, f.map_bytes_);
  if (f.stamp_ && f.stamp_->ids > static_cast<uint32_t>(vocab_size))
    throw UserError(fmt::format("{}: made with a tokenizer of {} ids ({}.tokenizer), more than the model's vocabulary "
                                "of {} (model.vocab_size); accepted: model.vocab_size >= {}", path, f.stamp_->ids,
                                path, vocab_size, f.stamp_->ids));
  if (at.width == 2 && vocab_size > 65536 && !f.stamp_)  // a stamp names its vocabulary: compared later
    throw UserError(fmt::format("{}: a 16-bit token file, but the vocabulary has {} ids (model.vocab_size): ids "
                                "above 65535 cannot be stored in it, so it was not made with this vocabulary; a "
                                "vocabulary over 65536 ids needs the 32-bit format (magic {}), which prepare-data "
                                "writes for it", path, vocab_size, kLlmc32Magic));
  check_token_range(f.tokens_, vocab_size, path);
  return f;
}

TokenFile::TokenFile(TokenFile&& o) noexcept { *this = std::move(o); }

TokenFile& TokenFile::operator=(TokenFile&& o) noexcept {
  if (this != &o) {
    unmap();
    path_ = std::move(o.path_);
    format_ = o.format_;
    map_ = std::exchange(o.map_, nullptr);
    map_bytes_ = std::exchange(o.map_bytes_, 0);
    idx_map_ = std::exchange(o.idx_map_, nullptr);
    idx_bytes_ = std::exchange(o.idx_bytes_, 0);
    index_ = std::exchange(o.index_, std::nullopt);
    tokens_ = std::exchange(o.tokens_, {});
    stamp_ = std::exchange(o.stamp_, std::nullopt);
  }
  return *this;
}

TokenFile::~TokenFile() { unmap(); }

void TokenFile::unmap() {
  if (map_) ::munmap(map_, map_bytes_);
  if (idx_map_) ::munmap(idx_map_, idx_bytes_);
  map_ = idx_map_ = nullptr;
  map_bytes_ = idx_bytes_ = 0;
  index_.reset();
}

void write_llmc_tokens(const std::string& path, std::span<const uint16_t> tokens) {
  if (tokens.size() > static_cast<size_t>(INT32_MAX))
    throw UserError(fmt::format("{}: {} tokens do not fit the llm.c header's int32 count", path, tokens.size()));
  std::array<int32_t, kLlmcHeaderInts> header{};
  header[0] = kLlmcMagic;
  header[1] = kLlmcVersion;
  header[2] = static_cast<int32_t>(tokens.size());
  // Beside, then renamed: a failed write leaves an earlier file of that name as it was.
  const std::string tmp = path + ".tmp";
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  if (!out) throw UserError(fmt::format("{}: cannot create the token file: {}", path, std::strerror(errno)));
  out.write(reinterpret_cast<const char*>(header.data()), kLlmcHeaderBytes);
  out.write(reinterpret_cast<const char*>(tokens.data()), static_cast<std::streamsize>(tokens.size() * 2));
  out.close();
  if (!out || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw UserError(fmt::format("{}: writing the token file failed: {}", path, std::strerror(errno)));
  }
}

}  // namespace holmes::data
