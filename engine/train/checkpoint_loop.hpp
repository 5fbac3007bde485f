// Checkpoints in the training loop (run.cpp): where a run starts (checkpoint.resume), saving
// every checkpoint.interval steps, at the end and on a stop signal, with the log lines.
#pragma once

#include <cstdint>
#include <memory>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "comm/errors.hpp"
#include "engine/spec/job_spec.hpp"
#include "engine/checkpoint/checkpoint.hpp"
#include "engine/checkpoint/disk_space.hpp"
#include "engine/train/loop_context.hpp"
#include "engine/checkpoint/run_folder.hpp"
#include "engine/checkpoint/writer_lock.hpp"
#include "engine/parallel/step_runner.hpp"

namespace holmes::train {

// A run resumed at `step` continues <output_dir>/<log.metrics>: keeps the lines of steps up to
// `step` and drops later ones (work of the stopped run that the checkpoint does not hold).
void trim_metrics_for_resume(const spec::JobSpec& spec, int64_t step);

// Where a run starts: checkpoint.resume (auto | none | PATH) resolved to the checkpoint to
// load, if any. PATH may be a step folder, a checkpoint.dir or a run's job.output_dir (their
// newest complete checkpoint). Reads manifests only. UserError naming the key, what PATH
// turned out to be and what is accepted; or a bad checkpoint, before anything is written.
struct ResumePoint {
  std::optional<checkpoint::CheckpointInfo> checkpoint;  // opened without checksums; nullopt = step 0
  std::string via;                           // how PATH led to it ("" = named directly)
  std::vector<std::string> skipped;          // incomplete step folders newer than it
  bool auto_found_none = false;              // resume: auto found no complete checkpoint
  // Set when `checkpoint` is held by peers, not in a folder (PeerSource::fetch): collective,
  // called by load_resume_point with the files this rank needs.
  std::function<checkpoint::PieceReader(const std::vector<size_t>&)> fetch;
};
// With checkpoint.init_from and no checkpoint to resume, also checks that folder's config.json
// describes the job's model (UserError naming both values of each key that differs).
ResumePoint find_resume_point(const spec::JobSpec& spec);

// Before anything is written, on every rank: checks the output folders are writable (each
// rank its checkpoint.dir, rank 0 also job.output_dir); rank 0 takes job.output_dir's writer
// lock (writer_lock.hpp: one writer per run); every rank finds the resume point; rank 0
// claims job.output_dir for this run (run_folder.hpp). Rank 0 decides, every rank learns the
// verdict, so all stop alike. Rank 0 then deletes what --overwrite replaces and records the run.
struct OutputClaim {
  std::string run_id;
  ResumePoint resume;
  checkpoint::WriterLock lock;  // rank 0: held until this is destroyed (the end of the run)
};
// `check_resume` (optional) sees the resume point first, on every rank: a UserError from it
// stops the job like the other checks.
OutputClaim claim_output(const spec::JobSpec& spec, const LoopContext& ctx,
                         const std::function<void(const ResumePoint&)>& check_resume = {});
// The checks of claim_output in one process, reading only (the local launcher runs them
// before it spawns workers): the folders are writable (`first`: job.output_dir too) and, for
// `first`, no live process writes job.output_dir and the claim this run would make holds.
// UserError as claim_output.
void check_outputs(const spec::JobSpec& spec, bool first);

// What one checkpoint of this run occupies on disk, all ranks together (collective over the
// ranks through ctx.max_over_ranks: each adds its shard, private and manifest bytes, priced
// by checkpoint_bytes_of_rank on its live shard), with the final weights' bytes
// (`final_weights`, 0 when the run writes none).
checkpoint::SpaceNeed checkpoint_space_need(const spec::JobSpec& spec, parallel::StepRunner& runner,
                                            const LoopContext& ctx, const checkpoint::RunTokenizer& tokenizer,
                                            uint64_t final_weights);
// On every rank before anything is written (claim_output's check_resume): UserError (exit 2)
// naming the folder, the bytes needed and free when checkpoint.dir's file system cannot hold
// one checkpoint (and the final weights where job.output_dir shares it) or, on `first` (rank
// 0), job.output_dir's the final weights; a warning (rank 0) when they cannot hold the new
// checkpoints the run holds at once (checkpoints_to_hold from the resume point: the run's
// checkpoints already there count towards checkpoint.keep).
void check_space(const spec::JobSpec& spec, checkpoint::SpaceNeed need, const ResumePoint& resume, bool first);

// Where a resumed run's data stream continues (the loader's position, docs/checkpoints.md):
// the checkpoint's recorded sequence count; for a checkpoint saved before positions were
// recorded, its tokens_seen / seq_len (what its steps had read); with another train.seq_len,
// the same number of tokens. `note` ("" when exact) says which, for the log.
struct DataResume {
  int64_t sequences = 0;
  std::string note;
};
DataResume data_resume_of(const checkpoint::CheckpointInfo& info, int seq_len);

// Loads the resume point into the runner's shard on every rank (with its optimizer state
// unless checkpoint.weights_only; checksums of the files this rank reads). Returns the
// 0-based step to continue at: the checkpoint's step, or 0 (fresh, or weights only). Rank 0
// says which checkpoint it took and which incomplete ones it skipped.
int64_t load_resume_point(const spec::JobSpec& spec, const ResumePoint& resume, parallel::StepRunner& runner,
                          const LoopContext& ctx);
// checkpoint.init_from on a fresh run (no checkpoint resumed): every rank reads its shard of
// the Hugging Face folder's weights into the runner (rank 0 says so); a resumed run ignores it.
void load_init_from(const spec::JobSpec& spec, const ResumePoint& resume, parallel::StepRunner& runner,
                    const LoopContext& ctx);

// Saves checkpoints of one run, each step at most once. A save copies the shard (params and
// owned moments) and writes it on a background thread while the next step trains; it is
// committed (a collective: manifest, marker) right after that step, so which checkpoints are
// complete at any step is deterministic. The pause the loop sees is the copy, whatever of the
// write the step did not hide, and the commit.
class CheckpointSaver {
 public:
  CheckpointSaver(const spec::JobSpec& spec, const LoopContext& ctx, std::string run_id,
                  checkpoint::RunTokenizer tokenizer = {});
  ~CheckpointSaver();  // waits for a write in flight (a crash leaves the previous checkpoint)
  // After `done` steps: commits the save started after the previous step, and starts one
  // when checkpoint.interval divides `done` (checkpoint.background_write false, or `last`:
  // the run ends after this step, saves now); then, but after the last step, the peer copies
  // (LoopContext::mirror).
  void after_step(parallel::StepRunner& runner, int64_t done, bool last);
  // Whether after_step(done) starts a save (checkpoint.interval divides `done`).
  bool due(int64_t done) const { return spec_.checkpoint.interval > 0 && done % spec_.checkpoint.interval == 0; }
  // Saves `done` now from the live buffers and commits it (the end of the run, a stop
  // signal). Collective.
  void save(parallel::StepRunner& runner, int64_t done);

 private:
  struct Pending;
  checkpoint::SaveContext context(const parallel::StepRunner& runner, int64_t done);
  void start(parallel::StepRunner& runner, int64_t done);
  void finish();  // waits for the pending write, commits it, prints the log line
  void mirror(parallel::StepRunner& runner, int64_t done);  // ctx.mirror, timed on rank 0
  bool refused(int64_t done);  // ctx.save_refused says no (told once on rank 0)
  // A wait of the save of step `done` (folder `dir`) ended on a member that will not come: says
  // so on rank 0 and hands the survivors to ctx.save_abandoned; rethrows without one.
  void abandon(int64_t done, const std::string& dir, const comm::StoreWaitAbandoned& e);
  void commit_hook(int64_t done) const;  // TestSignal's ":commit" hook, before a commit's waits
  bool refusal_told_ = false;
  // Rank 0: "saved checkpoint step-00000010 in 0.42 s (12.3 MB<note>)".
  void report(const checkpoint::SaveResult& r, double pause_s, const std::string& note) const;

  const spec::JobSpec& spec_;
  const LoopContext& ctx_;
  const std::string run_id_;
  const checkpoint::RunTokenizer tokenizer_;
  int64_t last_saved_ = -1;
  std::string spec_text_;
  std::unique_ptr<Pending> pending_;
  struct Copy {
    std::vector<float> params, m, v;
  };
  std::vector<Copy> copies_;  // the shard of each model chunk as of the pending save
};

// Test hook, read once when the loop starts: HOLMES_TEST_SIGNAL_AFTER_STEP="13:KILL" (or TERM,
// USR1, STOP; "13:KILL:2" for rank 2) makes rank 0 (or the rank named) send itself that signal
// in step 13, a deterministic stand-in for a preemption, a crash or a hang: TERM and USR1 arrive
// during the step (the job stops after it), KILL and STOP after it (also while a checkpoint of
// it is being written). "13:STOP:2:commit" sends it at the commit of the checkpoint of step 13
// instead (after the ranks met to commit it, before the commit's waits): a rank frozen or
// killed between the two.
struct TestSignal {
  int64_t step = -1;
  int signal = 0;  // 0 = no hook
  bool at_commit = false;
  static TestSignal from_environment(int rank);  // UserError for a malformed value
  void raise_if(int64_t done, bool before_sums) const;
  void raise_at_commit(int64_t step_saved) const;
};

}  // namespace holmes::train
