// A run's output folder belongs to one run. Every run has an id: a fresh start draws a new
// one, a resumed run keeps the id of the checkpoint it continues. The id is written to
// <job.output_dir>/run.json when the run starts and into every checkpoint manifest, so
// that
//   - a fresh start into a folder that holds another run (its checkpoints, final weights,
//     metrics) is refused before anything is written: continuing would mix the two runs
//     (retention deleting the newer run's checkpoints, final/model.bin replaced, metrics
//     truncated, --resume auto continuing the older run). The ways out: --resume auto,
//     another job.output_dir, or job.overwrite (--overwrite), which deletes the other run's
//     checkpoints, final weights and metrics first;
//   - retention (checkpoint.keep) only ever deletes checkpoints of the run saving.
// Nothing here deletes a file it does not recognise as a run's output.
#pragma once

#include <string>
#include <vector>

#include "engine/spec/job_spec.hpp"

namespace holmes::checkpoint {


// One output of an earlier run found in the job's folders.
struct RunOutput {
  std::string path;
  std::string kind;    // "checkpoints", "incomplete checkpoints", "final weights", "metrics", "run record"
  std::string run_id;  // the run that wrote it; "" = unknown (written before run ids)
};

// What the job's folders (job.output_dir, checkpoint.dir) hold of earlier runs.
struct RunFolder {
  std::string recorded_run;  // the id in run.json; "" when there is none
  std::vector<RunOutput> outputs;
  bool empty() const { return outputs.empty(); }
};
RunFolder inspect_run_folder(const spec::JobSpec& spec);

// How this invocation starts.
struct RunStart {
  bool resumed = false;        // continues a checkpoint's training state (not weights_only)
  std::string continues;       // that checkpoint's run id ("" = saved before run ids)
  std::string source;          // the checkpoint folder read ("" = none); overwrite never deletes it
  bool auto_found_none = false;  // --resume auto found no complete checkpoint: starts at step 0
  bool resume_auto = false;      // --resume auto was given (messages do not offer it again)
};

struct RunClaim {
  std::string run_id;                // this run's id
  std::vector<std::string> remove;   // another run's outputs to delete first (job.overwrite)
  bool write_record = true;          // run.json must be (re)written
};

// Decides this run's id against what the folders hold. Throws UserError (exit 2) naming the
// folder, what it holds and the three ways out when starting would mix two runs and
// job.overwrite is false, or when overwriting would delete the checkpoint being loaded.
// Reads only; `new_id` is the id a fresh run takes.
RunClaim claim_run_folder(const spec::JobSpec& spec, const RunStart& start, const RunFolder& folder,
                          const std::string& new_id);

// Carries out a claim (one process of the job: the single process or rank 0): deletes
// claim.remove, saying what, and writes run.json.
void take_run_folder(const spec::JobSpec& spec, const RunClaim& claim);

// A new random run id (16 hex digits).
std::string new_run_id();

// job.output_dir and checkpoint.dir must be folders this process can create and write: a
// probe file is created and removed in each. UserError naming the key, the path and why.
// `output_dir` false: only checkpoint.dir (ranks other than 0 write no other outputs).
void check_output_folders_writable(const spec::JobSpec& spec, bool output_dir = true);

}  // namespace holmes::checkpoint
