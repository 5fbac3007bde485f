#include "engine/checkpoint/run_folder.hpp"
#include "engine/spec/run_paths.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include "common/errors.hpp"
#include "common/format.hpp"
#include "engine/checkpoint/checkpoint.hpp"

namespace holmes::checkpoint {

namespace fs = std::filesystem;

namespace {

std::string run_file(const spec::JobSpec& spec) { return spec::RunPaths::of(spec).run_record; }

std::string read_recorded_run(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const auto key = line.find("\"run\": \"");
    if (key == std::string::npos) continue;
    const auto begin = key + 8, end = line.find('"', begin);
    if (end != std::string::npos) return line.substr(begin, end - begin);
  }
  return "";
}

std::string short_id(const std::string& id) { return id.empty() ? "without an id" : id; }

// "run 1a2b...: checkpoints step-00000200, step-00000300 in DIR; final weights ...; metrics ..."
std::string describe(const std::vector<const RunOutput*>& outputs) {
  std::map<std::string, std::map<std::string, std::vector<std::string>>> by_run;  // run -> kind -> paths
  for (const RunOutput* o : outputs) by_run[o->run_id][o->kind].push_back(o->path);
  std::vector<std::string> runs;
  for (auto& [run, kinds] : by_run) {
    std::vector<std::string> parts;
    for (auto& [kind, paths] : kinds) {
      std::sort(paths.begin(), paths.end());
      if (kind.find("checkpoints") == std::string::npos) {
        parts.push_back(fmt::format("{} {}", kind, fmt::join(paths, ", ")));
        continue;
      }
      std::vector<std::string> names;
      for (const auto& p : paths) names.push_back(fs::path(p).filename().string());
      if (names.size() > 4) names = {names.front(), "...", names.back()};
      parts.push_back(fmt::format("{} {} ({} in {})", kind, fmt::join(names, ", "), paths.size(),
                                  fs::path(paths.front()).parent_path().string()));
    }
    runs.push_back(fmt::format("run {}: {}", short_id(run), fmt::join(parts, "; ")));
  }
  return fmt::format("{}", fmt::join(runs, " | "));
}

// What to do instead; --resume auto is offered only to a run that did not ask for it already.
std::string ways_out(bool resume_auto) {
  return std::string(resume_auto ? "" : "continue it with --resume auto, ") +
         "write to another folder with --set job.output_dir=DIR, or delete its checkpoints, final weights and metrics "
         "and start over with --overwrite (job.overwrite)";
}

bool inside(const std::string& path, const std::string& folder) {
  if (path.empty()) return false;
  std::error_code ec;
  const auto p = fs::weakly_canonical(path, ec), f = fs::weakly_canonical(folder, ec);
  auto [pi, fi] = std::mismatch(p.begin(), p.end(), f.begin(), f.end());
  return fi == f.end();
}

}  // namespace

RunFolder inspect_run_folder(const spec::JobSpec& spec) {
  RunFolder f;
  std::error_code ec;
  if (fs::is_regular_file(run_file(spec), ec)) {
    f.recorded_run = read_recorded_run(run_file(spec));
    f.outputs.push_back({run_file(spec), "run record", f.recorded_run});
  }
  // A step folder without a manifest is a save that never committed. Only the writer of this
  // folder (writer_lock.hpp: one at a time) makes them, so it belongs to the run recorded
  // here: a writer killed during its first save leaves its run resumable, not "another run".
  for (const StepFolder& s : list_step_folders(spec::RunPaths::of(spec).checkpoints))
    f.outputs.push_back({s.path, s.complete ? "checkpoints" : "incomplete checkpoints",
                         !s.complete && s.run_id.empty() ? f.recorded_run : s.run_id});
  // Outputs without an id of their own belong to the run that run.json names.
  const spec::RunPaths paths = spec::RunPaths::of(spec);
  if (fs::exists(paths.final_dir, ec)) f.outputs.push_back({paths.final_dir, "final weights", f.recorded_run});
  if (!paths.metrics.empty() && fs::exists(paths.metrics, ec))
    f.outputs.push_back({paths.metrics, "metrics", f.recorded_run});
  return f;
}

RunClaim claim_run_folder(const spec::JobSpec& spec, const RunStart& start, const RunFolder& folder,
                          const std::string& new_id) {
  RunClaim c;
  c.run_id = new_id;
  std::set<std::string> named;
  bool unnamed = false;
  for (const auto& o : folder.outputs) {
    if (o.run_id.empty()) unnamed = true;
    else named.insert(o.run_id);
  }
  // The outputs that would mix with this run.
  std::vector<const RunOutput*> clash;
  if (start.resumed) {
    // A checkpoint from before run ids continues the run the folder records, if any.
    c.run_id = !start.continues.empty() ? start.continues : !folder.recorded_run.empty() ? folder.recorded_run : new_id;
    for (const auto& o : folder.outputs)
      if (!o.run_id.empty() && o.run_id != c.run_id) clash.push_back(&o);
  } else if (start.auto_found_none && named.size() == 1 && !unnamed) {
    c.run_id = *named.begin();  // e.g. requeued before its first checkpoint: the same run, from step 0
  } else {
    for (const auto& o : folder.outputs) clash.push_back(&o);
  }
  c.write_record = folder.recorded_run != c.run_id;
  if (clash.empty()) return c;

  const std::string held = describe(clash);
  if (!spec.job.overwrite) {
    if (start.resumed)
      throw UserError(fmt::format("job.output_dir: {} holds another run's outputs ({}), but this job continues run {} "
                                  "from {}; resuming there would mix the two runs: write to another folder with --set "
                                  "job.output_dir=DIR, or delete the other run's outputs with --overwrite "
                                  "(job.overwrite)", spec.job.output_dir, held, short_id(c.run_id), start.source));
    if (start.auto_found_none)
      throw UserError(fmt::format("job.output_dir: {} holds outputs ({}) but --resume auto found no complete checkpoint "
                                  "in {} to continue, and the outputs are not all of one run; starting over there would "
                                  "mix runs: {}", spec.job.output_dir, held, spec::RunPaths::of(spec).checkpoints, ways_out(true)));
    throw UserError(fmt::format("job.output_dir: {} already holds a run ({}); starting a new run there would mix the "
                                "two: {}", spec.job.output_dir, held, ways_out(start.resume_auto)));
  }
  for (const RunOutput* o : clash) {
    if (inside(start.source, o->path))
      throw UserError(fmt::format("--overwrite (job.overwrite) would delete {}, the checkpoint this job loads ({}); "
                                  "copy it elsewhere first or write to another job.output_dir", o->path, start.source));
    c.remove.push_back(o->path);
  }
  c.write_record = true;
  return c;
}

void take_run_folder(const spec::JobSpec& spec, const RunClaim& claim) {
  for (const auto& path : claim.remove) {
    std::error_code ec;
    // A checkpoint loses its marker first, so a removal that stops half-way leaves it incomplete.
    fs::remove(path + "/COMMITTED", ec);
    fs::remove_all(path, ec);
    if (ec) throw std::runtime_error(fmt::format("--overwrite: cannot delete {}: {}", path, ec.message()));
    fmt::print("overwrite: deleted {}\n", path);
  }
  if (!claim.write_record) return;
  fs::create_directories(spec.job.output_dir);
  const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char when[32] = {};
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  const std::string tmp = run_file(spec) + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << fmt::format("{{\"run\": \"{}\", \"job\": {}, \"started\": \"{}\"}}\n", claim.run_id,
                       json_quote(spec.job.name), when);
    if (!out) throw std::runtime_error(fmt::format("{}: cannot write the run record", tmp));
  }
  fs::rename(tmp, run_file(spec));
}

std::string new_run_id() {
  std::random_device rd;
  const uint64_t id = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^
                      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  return fmt::format("{:016x}", id);
}

namespace {

// Creates `dir` and a probe file in it; "" when that works, else why not.
std::string probe_writable(const std::string& dir) {
  std::error_code ec;
  for (fs::path p = fs::path(dir); !p.empty(); p = p.parent_path()) {
    if (fs::exists(p, ec)) {
      if (!fs::is_directory(p, ec)) return fmt::format("{} is a file, not a folder", p.string());
      break;
    }
    if (p == p.parent_path()) break;
  }
  fs::create_directories(dir, ec);
  if (ec) return fmt::format("cannot create it: {}", ec.message());
  const std::string probe = fmt::format("{}/.holmes-write-probe-{}", dir, ::getpid());
  std::ofstream out(probe, std::ios::trunc);
  out << "probe\n";
  out.close();
  const bool ok = static_cast<bool>(out);
  const int err = errno;
  fs::remove(probe, ec);
  return ok ? "" : fmt::format("cannot write in it: {}", std::strerror(err));
}

}  // namespace

void check_output_folders_writable(const spec::JobSpec& spec, bool output_dir) {
  std::vector<std::string> problems;
  if (output_dir)
    if (auto why = probe_writable(spec.job.output_dir); !why.empty())
      problems.push_back(fmt::format("job.output_dir: '{}': {}", spec.job.output_dir, why));
  const std::string key = spec.checkpoint.dir.empty() ? "checkpoint.dir (default <job.output_dir>/checkpoints)"
                                                      : "checkpoint.dir";
  if (auto why = probe_writable(spec::RunPaths::of(spec).checkpoints); !why.empty())
    problems.push_back(fmt::format("{}: '{}': {}", key, spec::RunPaths::of(spec).checkpoints, why));
  if (!problems.empty())
    throw UserError(fmt::format("{} (the run writes its checkpoints and outputs there; choose a folder you can "
                                "write)", fmt::join(problems, "; ")));
}

}  // namespace holmes::checkpoint
