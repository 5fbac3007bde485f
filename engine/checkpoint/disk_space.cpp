#include "engine/checkpoint/disk_space.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace holmes::checkpoint {

namespace fs = std::filesystem;

FolderSpace folder_space(const std::string& key, const std::string& dir) {
  fs::path p = fs::absolute(dir.empty() ? "." : dir);
  std::error_code ec;
  while (!fs::exists(p, ec) && p.has_parent_path() && p.parent_path() != p) p = p.parent_path();
  struct statvfs v {};
  struct stat st {};
  if (::statvfs(p.c_str(), &v) != 0 || ::stat(p.c_str(), &st) != 0)
    throw std::runtime_error(fmt::format("{}: '{}': cannot read the free space of its file system: {}", key, dir,
                                         std::strerror(errno)));
  return {key, dir, static_cast<uint64_t>(v.f_bavail) * v.f_frsize, static_cast<uint64_t>(st.st_dev),
          static_cast<uint64_t>(v.f_frsize)};
}

int64_t checkpoints_to_hold(int64_t start, int64_t steps, int64_t interval, int keep, int64_t existing) {
  if (start >= steps) return 0;
  const int64_t saves = interval > 0 ? steps / interval - start / interval + (steps % interval != 0 ? 1 : 0) : 1;
  return std::max<int64_t>(1, std::min<int64_t>(static_cast<int64_t>(keep) + 1, existing + saves) - existing);
}

std::string bytes_text(uint64_t b) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB", "PB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1000 && u < 5) v /= 1000, ++u;
  return u == 0 ? fmt::format("{} B", b) : fmt::format("{:.1f} {} ({} bytes)", v, units[u], b);
}

namespace {

constexpr const char* kAccepted =
    "free space there, or point checkpoint.dir or job.output_dir at a file system with room (--set "
    "checkpoint.dir=DIR, --set job.output_dir=DIR), or train a smaller model";

std::string one_checkpoint(const SpaceNeed& n) {
  return fmt::format("one checkpoint takes {} ({} shard file{} with the AdamW moments, and the manifest)",
                     bytes_text(n.checkpoint), n.world, n.world == 1 ? "" : "s");
}

}  // namespace

SpaceVerdict judge_space(const SpaceNeed& need, const FolderSpace& ckpt, const FolderSpace* out) {
  SpaceVerdict v;
  // Each file's last block is partly empty: at most a block per file more than its bytes (the
  // final weights are model.bin and the spec copy).
  SpaceNeed n = need;
  n.checkpoint += static_cast<uint64_t>(n.files) * ckpt.block;
  if (n.final_weights > 0) n.final_weights += 2 * (out ? out->block : ckpt.block);
  const bool shared = out && out->device == ckpt.device;
  const uint64_t final_here = shared ? n.final_weights : 0;
  const std::string final_text =
      n.final_weights ? fmt::format("the final weights are {}", bytes_text(n.final_weights)) : "";
  if (n.checkpoint + final_here > ckpt.free) {
    v.error = fmt::format(
        "{}: '{}': its file system has {} free, too little for this run: {}{}; needed at least {}. The run would "
        "fail at its first save and lose its training. Accepted: {}",
        ckpt.key, ckpt.dir, bytes_text(ckpt.free), one_checkpoint(n),
        final_here ? fmt::format(" and {} (written to {} '{}' on the same file system)", final_text, out->key, out->dir)
                   : "",
        bytes_text(n.checkpoint + final_here), kAccepted);
    return v;
  }
  if (out && !shared && n.final_weights > out->free) {
    v.error = fmt::format("{}: '{}': its file system has {} free, too little for this run: {}; needed at least {}. "
                          "The run would train to its end and then fail to write them. Accepted: {}",
                          out->key, out->dir, bytes_text(out->free), final_text, bytes_text(n.final_weights),
                          kAccepted);
    return v;
  }
  const uint64_t all = n.retained * n.checkpoint + final_here;
  if (n.retained > 1 && all > ckpt.free)
    v.warnings.push_back(fmt::format(
        "warning: {}: '{}': its file system has {} free, enough for one checkpoint but not for the {} new checkpoints "
        "this run holds at once ({}; checkpoint.keep {}, and a new one is written before the oldest is removed{}): {} "
        "needed. A save that finds the disk full stops the run (the checkpoints committed before stay usable). Free "
        "space, lower checkpoint.keep, or set checkpoint.dir to a larger file system",
        ckpt.key, ckpt.dir, bytes_text(ckpt.free), n.retained, one_checkpoint(n), n.keep,
        final_here ? fmt::format("; and {}", final_text) : "", bytes_text(all)));
  return v;
}

std::string space_note(int err, const std::string& path) {
  if (err != ENOSPC && err != EDQUOT) return "";
  const std::string dir = fs::path(path).parent_path().string();
  try {
    const FolderSpace s = folder_space("", dir);
    return fmt::format(" (no space left: the file system of {} has {} free)", dir, bytes_text(s.free));
  } catch (const std::exception&) {
    return fmt::format(" (no space left in the file system of {})", dir);
  }
}

}  // namespace holmes::checkpoint
