// Free space for what a run writes: before training, whether the file systems of
// checkpoint.dir and job.output_dir hold one checkpoint and the final weights (else exit 2: a
// run that cannot save loses its training at the first save), and whether they hold what
// checkpoint.keep retains at once (else a warning). Write errors that ran out of space say so.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace holmes::checkpoint {

// A folder's file system as statvfs sees it: the bytes an unprivileged writer may still use
// (f_bavail x f_frsize) and its device, read at the folder or, while it does not exist yet,
// at its nearest existing parent.
struct FolderSpace {
  std::string key;  // "checkpoint.dir", "job.output_dir": how the user names the folder
  std::string dir;
  uint64_t free = 0;
  uint64_t device = 0;  // st_dev: two folders with the same device share their free space
  uint64_t block = 0;   // f_frsize: a file occupies whole blocks (0 = count bytes only)
};
// std::runtime_error when neither the folder nor a parent can be read.
FolderSpace folder_space(const std::string& key, const std::string& dir);

// What a run writes, in bytes (all ranks together: the folders of a job on several nodes are
// on a file system they share, docs/checkpoints.md).
struct SpaceNeed {
  uint64_t checkpoint = 0;    // one checkpoint folder: shard files, private files, manifest, marker
  int world = 1;              // ranks (shard files) in it
  int files = 3;              // files in it (shard and private files, manifest, marker): each may end in a partial block
  uint64_t final_weights = 0;  // <output_dir>/final (model.bin and the spec copy); 0 = none written
  int64_t retained = 1;       // new checkpoints on disk at once at most (checkpoints_to_hold)
  int keep = 1;               // checkpoint.keep, for the message
};

// How many checkpoints more than are there now a run holds on disk at once: its saves (each
// checkpoint.interval step after `start`, and the last step) are each written before the
// oldest beyond `keep` is removed, so up to keep + 1 of the run's checkpoints, `existing` of
// which (its complete ones, when it resumes) are on disk already. At least 1 while it saves
// at all; 0 when it saves nothing (start >= steps).
int64_t checkpoints_to_hold(int64_t start, int64_t steps, int64_t interval, int keep, int64_t existing = 0);

// The verdict: `error` (for a UserError, exit 2) when the checkpoint folder's file system
// cannot hold one checkpoint (plus the final weights where job.output_dir shares it), or the
// output folder's the final weights; else `warnings` when they cannot hold `retained`
// checkpoints and the final weights. `output` is null on ranks that do not write it.
struct SpaceVerdict {
  std::string error;
  std::vector<std::string> warnings;
};
SpaceVerdict judge_space(const SpaceNeed& need, const FolderSpace& checkpoints, const FolderSpace* output);

// "1.5 GB (1493741568 bytes)".
std::string bytes_text(uint64_t bytes);

// Appended to a write error: for ENOSPC / EDQUOT, " (no space left: the file system of DIR has
// N free)"; else "".
std::string space_note(int err, const std::string& path);

}  // namespace holmes::checkpoint
