// A rank's private state beside its shard in a checkpoint folder (StepRunner::private_state:
// a diloco replica's own weights, AdamW moments and outer state): private-NNNNN.bin, written
// before the commit so that COMMITTED covers it.
//   [8 bytes "HOLMESPV"][uint64 payload bytes][uint32 CRC32C of the payload][4 bytes 0][payload]
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace holmes::checkpoint {

std::string private_state_path(const std::string& step_dir, int rank);
// The file write_private_state writes for a payload of `payload` bytes.
uint64_t private_state_file_bytes(uint64_t payload);
// Durably (temporary name, fsync, rename).
void write_private_state(const std::string& step_dir, int rank, std::span<const std::byte> bytes);
// nullopt when the file is absent; UserError naming the file when it is truncated or corrupt.
std::optional<std::vector<std::byte>> read_private_state(const std::string& step_dir, int rank);

}  // namespace holmes::checkpoint
