#include "engine/checkpoint/private_state.hpp"

#include <fmt/format.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/errors.hpp"
#include "engine/checkpoint/checkpoint_io.hpp"

namespace holmes::checkpoint {

namespace {
constexpr char kPrivateMagic[9] = "HOLMESPV";
constexpr size_t kPrivateHeader = 24;
}  // namespace

std::string private_state_path(const std::string& step_dir, int rank) {
  return fmt::format("{}/private-{:05d}.bin", step_dir, rank);
}

uint64_t private_state_file_bytes(uint64_t payload) { return kPrivateHeader + payload; }

void write_private_state(const std::string& step_dir, int rank, std::span<const std::byte> bytes) {
  char head[kPrivateHeader] = {};
  std::memcpy(head, kPrivateMagic, 8);
  const uint64_t n = bytes.size();
  const uint32_t crc = crc32c(bytes.data(), bytes.size());
  std::memcpy(head + 8, &n, 8);
  std::memcpy(head + 16, &crc, 4);
  DurableFile f(private_state_path(step_dir, rank));
  f.write(head, sizeof(head));
  f.write(bytes.data(), bytes.size());
  f.commit();
}

std::optional<std::vector<std::byte>> read_private_state(const std::string& step_dir, int rank) {
  const std::string path = private_state_path(step_dir, rank);
  if (!std::filesystem::exists(path)) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  char head[kPrivateHeader] = {};
  in.read(head, sizeof(head));
  uint64_t n = 0;
  uint32_t crc = 0;
  std::memcpy(&n, head + 8, 8);
  std::memcpy(&crc, head + 16, 4);
  const auto size = std::filesystem::file_size(path);
  if (!in || std::memcmp(head, kPrivateMagic, 8) != 0 || size != kPrivateHeader + n)
    throw UserError(fmt::format("{}: not a private state file of {} payload bytes ({} bytes on disk); the checkpoint "
                                "is damaged: resume from an older one (--resume PATH)", path, n, size));
  std::vector<std::byte> out(n);
  in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(n));
  if (!in || crc32c(out.data(), out.size()) != crc)
    throw UserError(fmt::format("{}: CRC32C mismatch; the checkpoint is damaged: resume from an older one "
                                "(--resume PATH)", path));
  return out;
}

}  // namespace holmes::checkpoint
