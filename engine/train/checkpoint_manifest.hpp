// The manifest of a checkpoint (internal to engine/train/checkpoint*.cpp): JSON written by
// hand (one piece per line), read back with yaml-cpp (JSON is YAML).
#pragma once

#include <string>
#include <vector>

#include "engine/train/checkpoint.hpp"

namespace holmes::train::ckpt {

inline constexpr const char* kManifestName = "manifest.json";
inline constexpr const char* kMarkerName = "COMMITTED";

// One "files" entry: what a rank sends to rank 0 after writing its shard file.
std::string file_entry_json(const CheckpointFile& f);

// The whole manifest around the ranks' file entries (in rank order).
std::string manifest_json(const SaveContext& ctx, const std::vector<std::string>& file_entries);

// Parses <dir>/manifest.json; UserError naming the file and the problem (malformed, missing
// key, future format version).
CheckpointInfo parse_manifest(const std::string& dir);

// Rank 0 after a commit: keeps the newest `keep` complete checkpoints under ckpt_dir and
// removes incomplete folders older than the newest complete one.
void prune_checkpoints(const std::string& ckpt_dir, int keep);

// "rank-00003.bin".
std::string shard_file_name(int rank);

}  // namespace holmes::train::ckpt
