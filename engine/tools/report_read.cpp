// Reading a run folder for the report: every file is optional and may be partial (a run that
// is writing its metrics, one killed mid-line); each problem becomes a sentence in
// RunFiles::missing instead of an error.
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/errors.hpp"
#include "engine/checkpoint/writer_lock.hpp"
#include "engine/spec/run_paths.hpp"
#include "engine/tools/plan_read.hpp"
#include "engine/tools/report.hpp"

namespace holmes::tools {

namespace fs = std::filesystem;

namespace {

using nlohmann::json;

bool read_text(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return static_cast<bool>(in) || in.eof();
}

double num(const json& row, const char* key) {
  const auto it = row.find(key);
  return it != row.end() && it->is_number() ? it->get<double>() : NAN;
}

// A row's list of stragglers ({"rank": 3, "ratio": 1.45, "since": 120, "peers": 3}); entries
// without a whole-number id are left out. Returns whether the row has the list.
bool read_stragglers(const json& row, const char* key, const char* id, std::vector<MetricRow::Straggler>& out) {
  const auto it = row.find(key);
  if (it == row.end() || !it->is_array()) return false;
  for (const json& e : *it) {
    if (!e.is_object() || !e.contains(id) || !e[id].is_number_integer() || e[id].get<int64_t>() < 0) continue;
    out.push_back({static_cast<int>(e[id].get<int64_t>()), num(e, "ratio"), num(e, "since"),
                   e.contains("peers") && e["peers"].is_number_integer() ? e["peers"].get<int>() : 0});
  }
  return true;
}

void read_metrics(const std::string& path, RunFiles& f) {
  std::string text;
  if (!fs::exists(path)) {
    f.missing.push_back(fmt::format("{}: no metrics yet (the run has not finished its first step, or log.metrics "
                                    "names another file: give --metrics NAME)", path));
    return;
  }
  if (!read_text(path, text)) {
    f.missing.push_back(fmt::format("{}: cannot be read", path));
    return;
  }
  std::istringstream in(text);
  std::string line;
  size_t number = 0, bad = 0, first_bad = 0;
  size_t consumed = 0;
  while (std::getline(in, line)) {
    ++number;
    consumed += line.size() + 1;
    if (line.empty()) continue;
    const bool last_unfinished = consumed > text.size();  // no newline after it: being written
    json row = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!row.is_object() || !row.contains("step")) {
      if (last_unfinished) {
        f.missing.push_back(fmt::format("{}: the last line ({}) is incomplete (the run is writing it, or stopped in "
                                        "the middle of it): left out", path, number));
      } else if (bad++ == 0) {
        first_bad = number;
      }
      continue;
    }
    MetricRow r;
    r.step = num(row, "step");
    r.loss = num(row, "loss"), r.val_loss = num(row, "val_loss"), r.step_ms = num(row, "step_ms");
    r.tokens_per_s = num(row, "tokens_per_s"), r.mfu = num(row, "mfu"), r.comm_share = num(row, "comm_share");
    r.comm_share_max = num(row, "comm_share_max"), r.entropy_floor = num(row, "entropy_floor");
    r.loss_replica = num(row, "loss_replica");
    r.figures_step = row.contains("figures_step") ? num(row, "figures_step") : r.step;
    for (const auto& [key, value] : row.items())
      if (key.rfind("val_loss/", 0) == 0 && value.is_number())
        r.val_sources.emplace_back(key.substr(9), value.get<double>());
    if (const auto it = row.find("comm_share_ranks"); it != row.end() && it->is_array())
      for (const json& v : *it) r.comm_share_ranks.push_back(v.is_number() ? v.get<double>() : NAN);
    if (const auto it = row.find("compute_ms_ranks"); it != row.end() && it->is_array())
      for (const json& v : *it) r.compute_ms_ranks.push_back(v.is_number() ? v.get<double>() : NAN);
    r.has_stragglers = read_stragglers(row, "stragglers", "rank", r.stragglers);
    read_stragglers(row, "straggler_replicas", "replica", r.straggler_replicas);
    f.rows.push_back(std::move(r));
  }
  if (bad > 0)
    f.missing.push_back(fmt::format("{}: {} line(s) are not metrics rows (the first: line {}): left out", path, bad,
                                    first_bad));
  size_t train = 0;
  for (const MetricRow& r : f.rows) train += std::isfinite(r.loss) ? 1 : 0;
  if (train < 2)
    f.missing.push_back(fmt::format("{}: {} training step(s) logged so far: the curves need at least two", path, train));
}

void read_run_record(const std::string& path, RunFiles& f) {
  std::string text;
  if (!read_text(path, text)) {
    f.missing.push_back(fmt::format("{}: no run record", path));
    return;
  }
  const json j = json::parse(text, nullptr, false);
  if (!j.is_object()) {
    f.missing.push_back(fmt::format("{}: not a JSON object: run id and job name unknown", path));
    return;
  }
  f.run_id = j.value("run", std::string());
  f.job = j.value("job", std::string());
  f.started = j.value("started", std::string());
}

void read_plan(const std::string& path, RunFiles& f) {
  std::string text;
  if (!read_text(path, text)) {
    f.missing.push_back(fmt::format("{}: no plan (runs write it at the start since the run report exists; "
                                    "`holmes-train --plan-only --format html` draws the plan of a job spec)", path));
    return;
  }
  try {
    f.plan = read_plan_json(text, path);
  } catch (const std::exception& e) {
    f.missing.push_back(fmt::format("the plan picture is left out: {}", e.what()));
  }
}

// cluster.calibrate writes where the spec says; the lab keeps it beside the run folder.
void read_calibration(const std::string& dir, RunFiles& f) {
  for (const fs::path& p : {fs::path(dir) / "calibration.yaml", fs::path(dir).parent_path() / "calibration.yaml"}) {
    std::error_code ec;
    if (!fs::is_regular_file(p, ec)) continue;
    try {
      f.calibration = topo::load_calibration_file(p.string());
      f.calibration_path = p.string();
    } catch (const std::exception& e) {
      f.missing.push_back(fmt::format("calibration left out: {}", e.what()));
    }
    return;
  }
}

}  // namespace

RunFiles read_run_files(const std::string& dir, const std::string& metrics_name) {
  std::error_code ec;
  if (!fs::exists(dir, ec))
    throw UserError(fmt::format("report: RUN_DIR '{}' does not exist; expected a run's output folder (job.output_dir, "
                                "e.g. runs/tiny-gpt)", dir));
  if (!fs::is_directory(dir, ec))
    throw UserError(fmt::format("report: RUN_DIR '{}' is not a folder; expected a run's output folder "
                                "(job.output_dir, e.g. runs/tiny-gpt)", dir));
  const spec::RunPaths paths = spec::RunPaths::folder(dir, metrics_name);
  if (!fs::exists(paths.run_record, ec) && !fs::exists(paths.plan, ec) && !fs::exists(paths.metrics, ec))
    throw UserError(fmt::format("report: '{}' is not a run folder: it holds none of {}, {} and {}; expected a run's "
                                "output folder (job.output_dir){}", dir, spec::RunPaths::kRunRecord,
                                spec::RunPaths::kPlan, metrics_name,
                                metrics_name == "metrics.jsonl" ? " (--metrics NAME when log.metrics names another file)"
                                                                : ""));
  RunFiles f;
  f.dir = dir;
  read_run_record(paths.run_record, f);
  read_metrics(paths.metrics, f);
  read_plan(paths.plan, f);
  read_calibration(dir, f);
  try {
    checkpoint::check_no_live_writer(dir);
  } catch (const UserError& e) {
    f.live = true;
    f.writer = checkpoint::describe_writer(checkpoint::read_writer_info(paths.writer_lock));
  }
  return f;
}

}  // namespace holmes::tools
