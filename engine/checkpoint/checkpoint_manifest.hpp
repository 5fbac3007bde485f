// The manifest of a checkpoint (internal to engine/checkpoint): JSON written by
// hand (one piece per line), read back with yaml-cpp (JSON is YAML).
#pragma once

#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint.hpp"

namespace holmes::checkpoint {

inline constexpr const char* kManifestName = "manifest.json";
inline constexpr const char* kMarkerName = "COMMITTED";

// One "files" entry: what a rank sends to rank 0 after writing its shard file.
std::string file_entry_json(const CheckpointFile& f);

// One "files" entry read back (UserError naming `what` when malformed).
CheckpointFile parse_file_entry_text(const std::string& text, const std::string& what);

// The whole manifest around the ranks' file entries (in rank order).
std::string manifest_json(const SaveContext& ctx, const std::vector<std::string>& file_entries);

// Parses <dir>/manifest.json; UserError naming the file and the problem (malformed, missing
// key, future format version).
CheckpointInfo parse_manifest(const std::string& dir);

// Rank 0 after a commit: keeps the newest `keep` complete checkpoints of run `run_id` under
// ckpt_dir and removes that run's incomplete folders older than its newest complete one.
// Folders of any other run (or of no known run) are never touched.
void prune_checkpoints(const std::string& ckpt_dir, int keep, const std::string& run_id);

// The "run" value of <dir>/manifest.json, read from its first lines (the tensor index is
// not parsed); "" when the manifest is missing or has none.
std::string manifest_run_id(const std::string& dir);

// "rank-00003.bin".
std::string shard_file_name(int rank);

}  // namespace holmes::checkpoint
