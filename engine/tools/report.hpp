// `holmes-train report RUN_DIR`: one self-contained HTML page of a run from the files it
// writes (metrics.jsonl, plan.json, run.json, calibration.yaml when there is one), while it
// runs or after: loss and validation loss against steps and tokens with the entropy floor,
// tokens/s, MFU, step time, each rank's communication wait against its compute, each rank's
// compute per step and the stragglers the run named, measured against planned, and the plan
// picture. Partial or damaged files give a page that says what
// is missing; only a folder that is no run at all is an error. docs/pictures.md.
#pragma once

#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/plan/plan.hpp"
#include "engine/topo/calibration.hpp"

namespace holmes::tools {

// One line of metrics.jsonl (NaN where the line has no such key).
struct MetricRow {
  double step = 0;
  double loss = 0, val_loss = 0, step_ms = 0, tokens_per_s = 0, mfu = 0, comm_share = 0, comm_share_max = 0;
  double entropy_floor = 0;
  // A mixture's validation rows: each source's loss (val_loss/NAME keys), by name.
  std::vector<std::pair<std::string, double>> val_sources;
  // A diloco step between outer syncs: the replica whose loss `loss` is (NaN: the job's).
  double loss_replica = NAN;
  std::vector<double> comm_share_ranks;  // log rows of multi-process jobs (index = rank)
  // The step comm_share_max and comm_share_ranks end at (figures_step; older runs: `step`).
  double figures_step = 0;
  std::vector<double> compute_ms_ranks;  // each rank's mean compute ms per step over those steps
  // The stragglers named on a row with the job's figures (stragglers, straggler_replicas);
  // has_stragglers: the row says who they are (empty lists included), older runs' rows do not.
  struct Straggler {
    int id = 0;  // the rank or the replica
    double ratio = NAN, since = NAN;
    int peers = 0;
  };
  std::vector<Straggler> stragglers, straggler_replicas;
  bool has_stragglers = false;
};

// What a run folder holds, as read (nothing here throws once the folder is known to be a run).
struct RunFiles {
  std::string dir;
  std::string job, run_id, started;  // from run.json ("" when absent)
  std::vector<MetricRow> rows;       // in file order
  std::optional<plan::Plan> plan;    // plan.json
  std::optional<topo::Calibration> calibration;
  std::string calibration_path;
  bool live = false;        // a process holds the run's writer lock
  std::string writer;       // who, when live
  std::vector<std::string> missing;  // what could not be read, said for a person
};

// Reads `dir` (a run's job.output_dir). `metrics_name`: log.metrics of the run. Throws
// UserError (exit 2) when `dir` does not exist, is not a folder, or holds none of run.json,
// plan.json and the metrics file.
RunFiles read_run_files(const std::string& dir, const std::string& metrics_name = "metrics.jsonl");

// The colour of rank `rank` of `ranks` in the page's per-rank charts: one of eight while a
// legend can name them, else its pipeline stage's.
std::string rank_colour(const RunFiles& files, size_t rank, size_t ranks);

// The page's straggler section (report_stragglers.cpp): each rank's compute per step and who
// was named a straggler, since when and by how much.
std::string straggler_section(const RunFiles& files);

// The page. refresh_s > 0 with files.live: the page reloads itself (meta refresh).
std::string format_report_html(const RunFiles& files, int refresh_s = 30);

}  // namespace holmes::tools
