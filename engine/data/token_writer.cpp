#include "engine/data/token_writer.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "common/errors.hpp"

namespace holmes::data {

namespace {

std::array<int32_t, kLlmcHeaderInts> header_of(int width, int64_t count, const TokenizerStamp& stamp) {
  std::array<int32_t, kLlmcHeaderInts> h{};
  h[0] = width == 2 ? kLlmcMagic : kLlmc32Magic;
  h[1] = width == 2 ? kLlmcVersion : kLlmc32Version;
  h[2] = static_cast<int32_t>(count);
  h[3] = kTokenizerStampTag;
  h[4] = static_cast<int32_t>(static_cast<uint32_t>(stamp.hash));
  h[5] = static_cast<int32_t>(static_cast<uint32_t>(stamp.hash >> 32));
  h[6] = static_cast<int32_t>(stamp.ids);
  return h;
}

}  // namespace

TokenWriter::TokenWriter(std::string path, uint32_t id_count, TokenizerStamp stamp)
    : path_(std::move(path)), tmp_(fmt::format("{}.tmp-{}", path_, ::getpid())), width_(id_count > 65536 ? 4 : 2),
      stamp_(stamp) {
  f_ = std::fopen(tmp_.c_str(), "wb");
  if (!f_) throw UserError(fmt::format("{}: cannot create the token file: {}", path_, std::strerror(errno)));
  const auto h = header_of(width_, 0, stamp_);
  std::fwrite(h.data(), sizeof(int32_t), h.size(), f_);
}

TokenWriter::~TokenWriter() {
  if (f_) {
    std::fclose(f_);
    std::remove(tmp_.c_str());
  }
}

void TokenWriter::append(std::span<const uint32_t> tokens) {
  size_t wrote;
  if (width_ == 4) {
    wrote = std::fwrite(tokens.data(), 4, tokens.size(), f_);
  } else {
    narrow_.assign(tokens.begin(), tokens.end());
    wrote = std::fwrite(narrow_.data(), 2, narrow_.size(), f_);
  }
  if (wrote != tokens.size())
    throw UserError(fmt::format("{}: writing the token file failed: {}", tmp_, std::strerror(errno)));
  count_ += static_cast<int64_t>(tokens.size());
  if (count_ > INT32_MAX)
    throw UserError(fmt::format("{}: more than {} tokens do not fit the llm.c header's int32 count; split the input "
                                "into several prepare-data runs", path_, INT32_MAX));
}

std::string TokenWriter::described() const {
  return fmt::format("{} (llm.c format, {}-bit ids)", path_, 8 * width_);
}

void TokenWriter::commit() {
  const auto h = header_of(width_, count_, stamp_);
  const bool ok = std::fseek(f_, 0, SEEK_SET) == 0 && std::fwrite(h.data(), sizeof(int32_t), h.size(), f_) == h.size() &&
                  std::fflush(f_) == 0 && ::fsync(::fileno(f_)) == 0;
  const int err = errno;
  const bool closed = std::fclose(f_) == 0;
  f_ = nullptr;
  if (!ok || !closed || std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    std::remove(tmp_.c_str());
    throw UserError(fmt::format("{}: writing the token file failed: {}", path_, std::strerror(ok ? errno : err)));
  }
}

}  // namespace holmes::data
