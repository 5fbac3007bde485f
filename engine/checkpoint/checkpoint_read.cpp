// Opening a checkpoint: marker, manifest, file sizes, checksums and headers; finding the
// newest complete one.
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <vector>

#include "common/errors.hpp"
#include "engine/spec/run_paths.hpp"
#include "engine/checkpoint/checkpoint.hpp"
#include "engine/checkpoint/checkpoint_io.hpp"
#include "engine/checkpoint/checkpoint_manifest.hpp"

namespace holmes::checkpoint {

namespace fs = std::filesystem;

void verify_checkpoint_file(const CheckpointInfo& info, const CheckpointFile& f, bool checksums) {
  const std::string path = info.dir + "/" + f.name;
  std::error_code ec;
  const uint64_t size = fs::file_size(path, ec);
  if (ec) throw UserError(fmt::format("{}: shard file is missing or unreadable ({})", path, ec.message()));
  if (size < f.bytes)
    throw UserError(fmt::format("{}: truncated: {} bytes, the manifest says {}", path, size, f.bytes));
  if (size > f.bytes)
    throw UserError(fmt::format("{}: {} bytes, the manifest says {} (not the file this checkpoint wrote)", path, size,
                                f.bytes));
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw UserError(fmt::format("{}: cannot open the shard file", path));
  std::vector<char> buf(size_t{16} << 20);
  uint32_t crc = 0;
  uint64_t done = 0;
  char head[kHeaderBytes] = {};
  while (done < size) {
    const ssize_t n = ::read(fd, buf.data(), std::min<uint64_t>(buf.size(), checksums ? size - done : kHeaderBytes));
    if (n <= 0) break;
    if (done == 0) std::copy(buf.data(), buf.data() + std::min<ssize_t>(n, kHeaderBytes), head);
    crc = crc32c(buf.data(), static_cast<size_t>(n), crc);
    done += static_cast<uint64_t>(n);
    if (!checksums) break;
  }
  ::close(fd);
  if (checksums && done != size) throw UserError(fmt::format("{}: read error after {} bytes", path, done));
  if (checksums && crc != f.crc32c)
    throw UserError(fmt::format("{}: corrupted: CRC32C is {:08x}, the manifest says {:08x}", path, crc, f.crc32c));
  ShardHeader h;
  if (auto err = decode_header(head, &h); !err.empty()) throw UserError(fmt::format("{}: {}", path, err));
  if (static_cast<int>(h.rank) != f.rank || h.step != info.step || h.payload_bytes + kHeaderBytes != size)
    throw UserError(fmt::format("{}: header says rank {} step {} ({} payload bytes), the manifest says rank {} step {} "
                                "({} bytes)", path, h.rank, h.step, h.payload_bytes, f.rank, info.step, f.bytes));
}

namespace {

// step-NNNNNNNN folders under root with their step, newest first.
std::vector<std::pair<int64_t, std::string>> step_dirs(const std::string& root) {
  std::vector<std::pair<int64_t, std::string>> out;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return out;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string name = e.path().filename().string();
    if (!e.is_directory() || name.size() != 13 || name.rfind("step-", 0) != 0) continue;
    if (!std::all_of(name.begin() + 5, name.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
    out.emplace_back(std::stoll(name.substr(5)), e.path().string());
  }
  std::sort(out.begin(), out.end(), std::greater<>());
  return out;
}

bool is_complete(const std::string& step_dir) { return fs::exists(step_dir + "/" + kMarkerName); }

}  // namespace

const char* tensor_kind_name(TensorKind kind) {
  switch (kind) {
    case TensorKind::kParam: return "param";
    case TensorKind::kExpAvg: return "exp_avg";
    case TensorKind::kExpAvgSq: return "exp_avg_sq";
  }
  return "?";
}

std::string checkpoint_step_dir(const std::string& ckpt_dir, int64_t step) {
  return fmt::format("{}/step-{:08d}", ckpt_dir, step);
}

CheckpointInfo open_checkpoint(const std::string& dir_in, bool verify_checksums) {
  std::string dir = dir_in;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (!fs::is_directory(dir)) throw UserError(fmt::format("{}: checkpoint folder does not exist", dir));
  if (!fs::exists(dir + "/" + kMarkerName))
    throw UserError(fmt::format("{}/{}: commit marker is missing: the checkpoint is incomplete (its save was "
                                "interrupted); pass an earlier checkpoint or --resume auto", dir, kMarkerName));
  CheckpointInfo info = parse_manifest(dir);
  for (const auto& f : info.files) verify_checkpoint_file(info, f, verify_checksums);
  return info;
}

std::optional<std::string> find_latest_checkpoint(const std::string& ckpt_dir, std::vector<std::string>* skipped) {
  for (const auto& [step, path] : step_dirs(ckpt_dir)) {
    if (is_complete(path)) return path;
    if (skipped) skipped->push_back(path);
  }
  return std::nullopt;
}

std::vector<StepFolder> list_step_folders(const std::string& ckpt_dir) {
  std::vector<StepFolder> out;
  for (const auto& [step, path] : step_dirs(ckpt_dir))
    out.push_back({.step = step, .path = path, .complete = is_complete(path), .run_id = manifest_run_id(path)});
  return out;
}

std::optional<LocatedCheckpoint> locate_checkpoint(const std::string& path_in) {
  std::string path = path_in;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return std::nullopt;
  // A step folder, complete or not (open_checkpoint explains an incomplete one).
  if (fs::exists(path + "/" + kManifestName) || fs::path(path).filename().string().rfind("step-", 0) == 0)
    return LocatedCheckpoint{.dir = path, .via = "", .skipped = {}};
  for (const std::string& root : {path, spec::RunPaths::folder(path).checkpoints}) {
    LocatedCheckpoint found;
    if (auto latest = find_latest_checkpoint(root, &found.skipped)) {
      found.dir = *latest;
      found.via = fmt::format("the newest complete checkpoint in {}", root);
      return found;
    }
  }
  return std::nullopt;
}

std::string describe_checkpoint_path(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) return "checkpoint folder does not exist";
  if (fs::is_regular_file(st)) {
    const std::string name = fs::path(path).filename().string();
    const std::string what = name == spec::RunPaths::kModelFile ? " (final weights: no optimizer state)"
                             : name == kManifestName ? " (a manifest: give its folder)"
                                                         : "";
    return fmt::format("a file of {} bytes{}, not a checkpoint folder", fs::file_size(path, ec), what);
  }
  if (!fs::is_directory(st)) return "neither a file nor a folder";
  for (const std::string& root : {path, spec::RunPaths::folder(path).checkpoints}) {
    const auto steps = step_dirs(root);
    if (!steps.empty())
      return fmt::format("only incomplete checkpoints in {} ({} step folder(s), none with a {} marker)", root,
                         steps.size(), kMarkerName);
  }
  std::vector<std::string> names;
  size_t count = 0;
  for (const auto& e : fs::directory_iterator(path, ec)) {
    if (names.size() < 5) names.push_back(e.path().filename().string() + (e.is_directory() ? "/" : ""));
    ++count;
  }
  std::sort(names.begin(), names.end());
  if (count == 0) return "an empty folder, no checkpoint";
  const bool final_weights = fs::is_regular_file(spec::RunPaths::folder(path).final_model) ||
                             fs::is_regular_file(path + "/" + spec::RunPaths::kModelFile);
  return fmt::format("a folder of {} entr{} ({}{}) without a checkpoint{}", count, count == 1 ? "y" : "ies",
                     fmt::join(names, ", "), count > names.size() ? ", ..." : "",
                     final_weights ? "; its model.bin holds final weights only, no optimizer state" : "");
}

std::string manifest_run_id(const std::string& dir) {
  // manifest_json writes "run" among the first lines, before the (long) tensor index.
  std::ifstream in(dir + "/" + kManifestName);
  std::string line;
  for (int i = 0; i < 8 && std::getline(in, line); ++i) {
    const auto key = line.find("\"run\": \"");
    if (key == std::string::npos) continue;
    const auto begin = key + 8, end = line.find('"', begin);
    return end == std::string::npos ? "" : line.substr(begin, end - begin);
  }
  return "";
}

void prune_checkpoints(const std::string& ckpt_dir, int keep, const std::string& run_id) {
  int complete = 0;
  bool seen_complete = false;
  for (const StepFolder& f : list_step_folders(ckpt_dir)) {
    // An incomplete folder without a manifest is nobody's checkpoint: any run may drop it.
    const bool mine = f.run_id == run_id || (!f.complete && f.run_id.empty());
    if (!mine) continue;
    bool drop = false;
    if (f.complete) drop = ++complete > keep;
    else drop = seen_complete;  // newer incomplete ones may be a save in flight
    seen_complete = seen_complete || f.complete;
    if (drop) {
      std::error_code ec;
      if (f.complete) fs::remove(f.path + "/" + kMarkerName, ec);  // incomplete first, in case removal stops half-way
      fs::remove_all(f.path, ec);
    }
  }
}

}  // namespace holmes::checkpoint
