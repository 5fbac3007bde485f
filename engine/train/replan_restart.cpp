// The training side of a re-plan (replan_restart.hpp).
#include "engine/train/replan_restart.hpp"
#include "engine/train/metrics.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <stdexcept>

#include "engine/checkpoint/checkpoint.hpp"
#include "engine/spec/run_paths.hpp"
#include "engine/train/checkpoint_loop.hpp"

namespace holmes::train {

spec::JobSpec spec_after_replan(const spec::JobSpec& survivors, const spec::JobSpec& started) {
  spec::JobSpec s = survivors;
  s.job.overwrite = false;
  s.checkpoint.resume = started.checkpoint.resume;
  s.checkpoint.resume_path = started.checkpoint.resume_path;
  if (checkpoint::find_latest_checkpoint(spec::RunPaths::of(s).checkpoints, nullptr)) {
    s.checkpoint.resume = spec::ResumeMode::kAuto;
    s.checkpoint.resume_path.clear();
  }
  return s;
}

std::string discarded_metrics_path(const spec::JobSpec& spec) {
  const std::string path = spec::RunPaths::of(spec).metrics;
  if (path.empty()) return "";
  const std::string ext = ".jsonl";
  if (path.size() > ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0)
    return path.substr(0, path.size() - ext.size()) + "-discarded" + ext;
  return path + "-discarded";
}

Redo redo_from(const spec::JobSpec& spec, int64_t from_step, const std::string& source, int64_t steps_done) {
  Redo r;
  r.from_step = from_step;
  r.source = source;
  r.steps = std::max<int64_t>(0, steps_done - from_step);
  r.tokens = r.steps * spec.train.global_batch * spec.train.seq_len;
  return r;
}

Redo redo_of(const spec::JobSpec& spec, int64_t steps_done) {
  const ResumePoint resume = find_resume_point(spec);
  Redo r = redo_from(spec, resume.checkpoint ? resume.checkpoint->step : 0, "", steps_done);
  if (resume.checkpoint) r.checkpoint = resume.checkpoint->dir;
  return r;
}

void discard_redone_rows(const spec::JobSpec& spec, const Redo& redo, int generation) {
  const int64_t moved = set_aside_rows(spec::RunPaths::of(spec).metrics, redo.from_step, discarded_metrics_path(spec),
                                       "discarded_by_generation", generation);
  const std::string from = !redo.source.empty()    ? redo.source
                           : redo.checkpoint.empty() ? std::string("the start (no checkpoint yet)")
                                                     : fmt::format("checkpoint {} (step {})", redo.checkpoint, redo.from_step);
  fmt::print("re-plan: generation {} trains from {}: {} step(s) redone ({} tokens){}\n", generation, from, redo.steps,
             redo.tokens,
             moved > 0 ? fmt::format("; their {} earlier metrics row(s) moved to {}", moved, discarded_metrics_path(spec))
                       : "");
  std::fflush(stdout);
}

}  // namespace holmes::train
