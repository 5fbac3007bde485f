// The training side of a re-plan (docs/elastic.md "A single pipeline that loses a node"): what
// the survivors of a lost node train next, from where, and what becomes of the metrics rows of
// the steps they redo. The store protocol and the new groups are engine/runtime/replan.hpp.
#pragma once

#include <cstdint>
#include <string>

#include "engine/spec/job_spec.hpp"

namespace holmes::train {

// The spec a re-opened generation trains with: the survivors' (`survivors`: their degrees)
// resuming the run's newest complete checkpoint (checkpoint.resume auto) when the run's
// checkpoint folder holds one, else from where the job started (`started`'s checkpoint.resume:
// none, or the folder it was given); never job.overwrite (the run's own outputs are kept).
spec::JobSpec spec_after_replan(const spec::JobSpec& survivors, const spec::JobSpec& started);

// The metrics file beside <log.metrics> that keeps the rows of discarded steps:
// metrics.jsonl -> metrics-discarded.jsonl ("" when log.metrics is empty).
std::string discarded_metrics_path(const spec::JobSpec& spec);

// What a re-opened generation redoes: the steps after its checkpoint up to the most any
// survivor had finished.
struct Redo {
  int64_t from_step = 0;  // the checkpoint's step (0: no checkpoint, from the start)
  int64_t steps = 0;      // steps redone
  int64_t tokens = 0;     // tokens redone (steps x global batch x sequence)
  std::string checkpoint; // the folder it resumes ("" none)
  std::string source;     // said instead of the folder when the state comes from elsewhere (peer copies)
};
Redo redo_of(const spec::JobSpec& spec, int64_t steps_done);
// The same for a generation that takes the state of step `from_step` from `source`.
Redo redo_from(const spec::JobSpec& spec, int64_t from_step, const std::string& source, int64_t steps_done);

// Rank 0 of a re-opened generation, before its loop opens the log: moves the metrics rows of
// steps after redo.from_step out of <log.metrics> into discarded_metrics_path (appended, each
// row marked "discarded_by_generation": G), so <log.metrics> holds one continuous curve in
// which no step appears twice once the redone steps are logged; then says in the log how
// many steps and tokens are redone.
void discard_redone_rows(const spec::JobSpec& spec, const Redo& redo, int generation);

}  // namespace holmes::train
