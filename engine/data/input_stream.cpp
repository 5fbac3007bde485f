#include "engine/data/input_stream.hpp"

#include <fmt/format.h>
#include <zlib.h>
#include <zstd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include "common/errors.hpp"

namespace holmes::data {

const char* compression_name(Compression c) {
  switch (c) {
    case Compression::kNone: return "none";
    case Compression::kGzip: return "gzip";
    case Compression::kZstd: return "zstd";
  }
  return "?";
}

const char* input_format_name(InputFormat f) {
  switch (f) {
    case InputFormat::kAuto: return "auto";
    case InputFormat::kText: return "text";
    case InputFormat::kJsonl: return "jsonl";
  }
  return "?";
}

namespace {

constexpr size_t kInputBlock = size_t{1} << 20;  // compressed bytes read at a time

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

bool starts(const unsigned char* head, size_t n, const char* magic, size_t m) {
  return n >= m && std::memcmp(head, magic, m) == 0;
}

}  // namespace

InputKind detect_input(const std::string& path, const unsigned char* head, size_t n, InputFormat asked) {
  InputKind k;
  if (starts(head, n, "\x1f\x8b", 2)) k.compression = Compression::kGzip;
  else if (starts(head, n, "\x28\xb5\x2f\xfd", 4)) k.compression = Compression::kZstd;
  const char* other = starts(head, n, "\xfd\x37\x7a\x58\x5a\x00", 6) ? "xz"
                      : starts(head, n, "BZh", 3)                     ? "bzip2"
                      : starts(head, n, "PAR1", 4)                    ? "Parquet"
                                                                      : nullptr;
  if (other)
    throw UserError(fmt::format("prepare-data --input: '{}' is {} data; accepted: text or JSON Lines, plain or "
                                "compressed with gzip (.gz) or zstd (.zst){}", path, other,
                                std::string_view(other) == "Parquet"
                                    ? " (docs/training.md says how to turn Parquet into JSON Lines)"
                                    : fmt::format(" (recompress it: {} -dc FILE | zstd -o FILE.zst)",
                                                  std::string_view(other) == "xz" ? "xz" : "bzip2")));
  std::string_view name = path;
  const bool says_gz = ends_with(name, ".gz"), says_zst = ends_with(name, ".zst") || ends_with(name, ".zstd");
  if ((says_gz && k.compression != Compression::kGzip) || (says_zst && k.compression != Compression::kZstd))
    throw UserError(fmt::format("prepare-data --input: '{}' is named as {} data but does not start with its magic "
                                "number ({}); rename it, or recompress it", path, says_gz ? "gzip" : "zstd",
                                k.compression == Compression::kNone ? "it is not compressed"
                                                                    : fmt::format("it is {} data",
                                                                                  compression_name(k.compression))));
  if (says_gz) name.remove_suffix(3);
  else if (ends_with(name, ".zst")) name.remove_suffix(4);
  else if (says_zst) name.remove_suffix(5);
  k.format = asked != InputFormat::kAuto ? asked
             : ends_with(name, ".jsonl") || ends_with(name, ".ndjson") || ends_with(name, ".json")
                 ? InputFormat::kJsonl
                 : InputFormat::kText;
  return k;
}

struct InputStream::Codec {
  z_stream z{};
  bool z_open = false;
  ZSTD_DCtx* zstd = nullptr;
  size_t zstd_pending = 0;  // ZSTD_decompressStream's last hint: 0 = at a frame's end
  ~Codec() {
    if (z_open) inflateEnd(&z);
    if (zstd) ZSTD_freeDCtx(zstd);
  }
};

InputStream::InputStream(const std::string& path, Compression compression)
    : path_(path), compression_(compression), codec_(std::make_unique<Codec>()) {
  f_ = std::fopen(path.c_str(), "rb");
  if (!f_) throw UserError(fmt::format("{}: cannot read the input: {}", path, std::strerror(errno)));
  if (compression_ == Compression::kNone) return;
  in_ = std::make_unique<unsigned char[]>(kInputBlock);
  if (compression_ == Compression::kGzip) {
    // 15 + 16: a gzip wrapper (not zlib's); each member of a concatenated file is reset below.
    if (inflateInit2(&codec_->z, 15 + 16) != Z_OK)
      throw std::runtime_error(fmt::format("{}: zlib could not start a gzip stream", path));
    codec_->z_open = true;
  } else {
    codec_->zstd = ZSTD_createDCtx();
    if (!codec_->zstd) throw std::runtime_error(fmt::format("{}: zstd could not start a stream", path));
  }
}

InputStream::~InputStream() {
  if (f_) std::fclose(f_);
}

size_t InputStream::fill_input() {
  in_pos_ = 0;
  in_len_ = std::fread(in_.get(), 1, kInputBlock, f_);
  if (in_len_ == 0 && std::ferror(f_))
    throw UserError(fmt::format("{}: reading the input failed: {}", path_, std::strerror(errno)));
  if (in_len_ == 0) file_end_ = true;
  file_read_ += static_cast<int64_t>(in_len_);
  return in_len_;
}

size_t InputStream::read(char* p, size_t n) {
  if (n == 0 || stream_end_) return 0;
  if (compression_ == Compression::kNone) {
    const size_t got = std::fread(p, 1, n, f_);
    if (got == 0 && std::ferror(f_))
      throw UserError(fmt::format("{}: reading the input failed: {}", path_, std::strerror(errno)));
    file_read_ += static_cast<int64_t>(got);
    stream_end_ = got == 0;
    return got;
  }
  size_t out = 0;
  while (out < n) {
    if (in_pos_ == in_len_ && !file_end_) fill_input();
    const size_t avail = in_len_ - in_pos_;
    if (avail == 0 && file_end_) {
      const bool mid_frame = compression_ == Compression::kGzip ? codec_->z.total_in > 0 : codec_->zstd_pending != 0;
      if (mid_frame)
        throw UserError(fmt::format("{}: truncated {} data: the file ends inside a compressed frame", path_,
                                    compression_name(compression_)));
      stream_end_ = true;
      break;
    }
    if (compression_ == Compression::kGzip) {
      z_stream& z = codec_->z;
      z.next_in = in_.get() + in_pos_;
      z.avail_in = static_cast<uInt>(avail);
      z.next_out = reinterpret_cast<Bytef*>(p + out);
      z.avail_out = static_cast<uInt>(std::min<size_t>(n - out, 1u << 30));
      const uInt before = z.avail_out;
      const int rc = inflate(&z, Z_NO_FLUSH);
      in_pos_ = in_len_ - z.avail_in;
      out += before - z.avail_out;
      if (rc == Z_STREAM_END) {
        inflateReset(&z);  // a concatenated member may follow; total_in = 0 marks "between members"
        continue;
      }
      if (rc != Z_OK && rc != Z_BUF_ERROR)
        throw UserError(fmt::format("{}: corrupt gzip data ({})", path_, z.msg ? z.msg : "inflate failed"));
    } else {
      ZSTD_inBuffer in{in_.get() + in_pos_, avail, 0};
      ZSTD_outBuffer o{p + out, n - out, 0};
      const size_t rc = ZSTD_decompressStream(codec_->zstd, &o, &in);
      if (ZSTD_isError(rc))
        throw UserError(fmt::format("{}: corrupt zstd data ({})", path_, ZSTD_getErrorName(rc)));
      codec_->zstd_pending = rc;
      in_pos_ += in.pos;
      out += o.pos;
    }
  }
  return out;
}

}  // namespace holmes::data
