#include "engine/train/checkpoint_loop.hpp"

#include "engine/checkpoint/hf_format.hpp"
#include "engine/checkpoint/private_state.hpp"
#include "engine/spec/run_paths.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>

#include "engine/launch/signals.hpp"
#include "common/errors.hpp"
#include "engine/spec/load.hpp"
#include "engine/spec/schema.hpp"
#include "comm/store.hpp"
#include "engine/checkpoint/checkpoint.hpp"
#include "engine/checkpoint/checkpoint_manifest.hpp"
#include "engine/checkpoint/run_folder.hpp"
#include "engine/parallel/trainer.hpp"
#include "engine/train/metrics.hpp"

namespace holmes::train {

void trim_metrics_for_resume(const spec::JobSpec& spec, int64_t step) {
  set_aside_rows(spec::RunPaths::of(spec).metrics, step, /*side=*/"", "", 0);
}

// checkpoint.resume resolved alone (find_resume_point adds the init_from check).
ResumePoint find_checkpoint_to_resume(const spec::JobSpec& spec);

namespace {

// checkpoint.init_from's config.json against the job's model: a UserError naming every key
// that differs, before anything is written.
void check_init_from(const spec::JobSpec& spec) {
  const std::string& dir = spec.checkpoint.init_from;
  if (dir.empty()) return;
  if (!checkpoint::is_hf_folder(dir))
    throw UserError(fmt::format("checkpoint.init_from (--init-from) {}: not a Hugging Face checkpoint folder; accepted: "
                                "a folder with {} and {} (or {} and its shards)", dir, checkpoint::kHfConfigFile,
                                checkpoint::kSafetensorsFile, checkpoint::kSafetensorsIndexFile));
  const std::string diffs = checkpoint::hf_config_differences(checkpoint::read_hf_config(dir),
                                                              parallel::gpt_config_of(spec));
  if (!diffs.empty())
    throw UserError(fmt::format("checkpoint.init_from (--init-from) {}: the checkpoint is another model than the job's: "
                                "{}; set the job's model.* to the checkpoint's", dir, diffs));
}

}  // namespace

ResumePoint find_resume_point(const spec::JobSpec& spec) {
  ResumePoint r = find_checkpoint_to_resume(spec);
  if (!r.checkpoint) check_init_from(spec);
  return r;
}

ResumePoint find_checkpoint_to_resume(const spec::JobSpec& spec) {
  const auto& c = spec.checkpoint;
  ResumePoint r;
  if (c.resume == spec::ResumeMode::kNone) return r;
  std::string dir;
  if (c.resume == spec::ResumeMode::kAuto) {
    const auto latest = checkpoint::find_latest_checkpoint(spec::RunPaths::of(spec).checkpoints, &r.skipped);
    if (!latest) {
      r.auto_found_none = true;
      return r;
    }
    dir = *latest;
  } else {
    const auto located = checkpoint::locate_checkpoint(c.resume_path);
    if (!located)
      throw UserError(fmt::format("checkpoint.resume (--resume): {}: {}; accepted: auto, none, a checkpoint folder "
                                  "(step-NNNNNNNN with manifest.json and COMMITTED), a checkpoint.dir or a run's "
                                  "job.output_dir holding complete checkpoints", c.resume_path,
                                  checkpoint::describe_checkpoint_path(c.resume_path)));
    dir = located->dir;
    r.via = located->via;
    r.skipped = located->skipped;
  }
  r.checkpoint = checkpoint::open_checkpoint(dir, /*verify_checksums=*/false);
  return r;
}

namespace {

checkpoint::RunStart run_start(const spec::JobSpec& spec, const ResumePoint& resume) {
  checkpoint::RunStart start;
  start.resumed = resume.checkpoint && !spec.checkpoint.weights_only;
  if (resume.checkpoint) {
    start.continues = resume.checkpoint->run_id;
    start.source = resume.checkpoint->dir;
  }
  start.auto_found_none = resume.auto_found_none;
  start.resume_auto = spec.checkpoint.resume == spec::ResumeMode::kAuto;
  return start;
}

}  // namespace

namespace {

checkpoint::RunClaim claim_for(const spec::JobSpec& spec, const ResumePoint& resume) {
  return checkpoint::claim_run_folder(spec, run_start(spec, resume), checkpoint::inspect_run_folder(spec),
                                      checkpoint::new_run_id());
}

}  // namespace

void check_outputs(const spec::JobSpec& spec, bool first) {
  checkpoint::check_output_folders_writable(spec, first);
  if (first) checkpoint::check_no_live_writer(spec.job.output_dir);
  const ResumePoint resume = find_resume_point(spec);
  if (first) claim_for(spec, resume);
}

OutputClaim claim_output(const spec::JobSpec& spec, const LoopContext& ctx,
                         const std::function<void(const ResumePoint&)>& check_resume) {
  // Each rank's problem (rank 0: or its verdict "ok <run id>"), so that every rank stops alike.
  // A rank that rejoined a running job (rank 0 included) claims nothing: it reads the claim
  // rank 0 made at the start.
  const bool joined = ctx.joined_at >= 0;
  const bool first = ctx.rank == 0 && !joined;
  OutputClaim out;
  std::string mine;
  checkpoint::RunClaim claim;
  try {
    checkpoint::check_output_folders_writable(spec, first);
    // The lock before anything of the folder is read: a live writer may be saving or pruning.
    if (first) out.lock = checkpoint::WriterLock::take(spec.job.output_dir, spec.job.name);
    out.resume = find_resume_point(spec);
    if (check_resume) check_resume(out.resume);
    if (first) {
      claim = claim_for(spec, out.resume);
      mine = "ok " + claim.run_id;
    }
  } catch (const UserError& e) {
    mine = ctx.world > 1 && ctx.rank > 0 ? fmt::format("rank {}: {}", ctx.rank, e.what()) : e.what();
  }
  if (joined && ctx.store) {
    if (!mine.empty()) throw UserError(mine);
    const std::string claim_text = comm::get_string(*ctx.store, "run/claim/0",
                                                    comm::Millis(static_cast<int64_t>(spec.cluster.timeout_s * 1e3)));
    out.run_id = claim_text.substr(3);
    return out;
  }
  std::vector<std::string> verdicts{mine};
  if (ctx.store && ctx.world > 1) {
    verdicts.clear();
    for (const auto& b : comm::store_all_gather(*ctx.store, "run/claim", ctx.rank, ctx.world,
                                                comm::Bytes(mine.begin(), mine.end()),
                                                comm::Millis(static_cast<int64_t>(spec.cluster.timeout_s * 1e3))))
      verdicts.emplace_back(b.begin(), b.end());
  }
  if (verdicts[0].rfind("ok ", 0) != 0) throw UserError(verdicts[0]);
  for (size_t r = 1; r < verdicts.size(); ++r)
    if (!verdicts[r].empty()) throw UserError(verdicts[r]);
  if (first) checkpoint::take_run_folder(spec, claim);
  out.run_id = verdicts[0].substr(3);
  return out;
}

DataResume data_resume_of(const checkpoint::CheckpointInfo& info, int seq_len) {
  if (info.data_sequences < 0) {
    // Saved before the position was recorded: its steps read step x global_batch sequences,
    // which its tokens_seen counts in tokens.
    return {info.tokens_seen / seq_len,
            fmt::format("{} records no data position (an older checkpoint): the data stream continues at sequence {} "
                        "(its {} tokens seen / train.seq_len {})", info.dir, info.tokens_seen / seq_len,
                        info.tokens_seen, seq_len)};
  }
  if (info.data_seq_len == seq_len) return {info.data_sequences, ""};
  const int64_t tokens = info.data_sequences * info.data_seq_len;
  return {tokens / seq_len, fmt::format("{} read {} sequences of {} tokens; with train.seq_len {} the stream is cut "
                                        "anew and continues at sequence {} (the same tokens seen; which sequences "
                                        "follow is not what the saved run would have read)", info.dir,
                                        info.data_sequences, info.data_seq_len, seq_len, tokens / seq_len)};
}

int64_t load_resume_point(const spec::JobSpec& spec, const ResumePoint& resume, parallel::StepRunner& runner,
                          const LoopContext& ctx) {
  const auto& c = spec.checkpoint;
  const bool log = ctx.rank == 0;
  if (log)
    for (const auto& s : resume.skipped) fmt::print("resume: skipping incomplete checkpoint {} (no COMMITTED marker)\n", s);
  if (!resume.checkpoint) {
    if (log && resume.auto_found_none)
      fmt::print("resume: no complete checkpoint in {}; starting fresh\n", spec::RunPaths::of(spec).checkpoints);
    return 0;
  }
  const auto t0 = std::chrono::steady_clock::now();
  const checkpoint::CheckpointInfo& info = *resume.checkpoint;
  const std::string& dir = info.dir;
  const std::string via = resume.via.empty() ? "" : fmt::format(" ({})", resume.via);
  // Checksums of the files this rank reads (the tensors of its model chunks).
  std::vector<checkpoint::ShardState> states = runner.shard_states();
  auto mine = [&](const checkpoint::CheckpointPiece& p) {
    return std::any_of(states.begin(), states.end(), [&](const checkpoint::ShardState& st) { return st.layout->find(p.tensor); });
  };
  if (resume.fetch) {  // peer copies: every rank takes part in the transfer, then reads from memory
    const checkpoint::PieceReader read = resume.fetch(checkpoint::files_to_read(info, states, !c.weights_only));
    checkpoint::load_shard_states(info, parallel::gpt_config_of(spec), states, !c.weights_only, read);
  } else {
    for (const auto& f : info.files)
      if (std::any_of(f.pieces.begin(), f.pieces.end(), mine)) checkpoint::verify_checkpoint_file(info, f);
    checkpoint::load_shard_states(info, parallel::gpt_config_of(spec), states, !c.weights_only);
  }
  runner.upload_shard_state();
  if (runner.has_private_state() && !resume.fetch) {
    // diloco: this replica's own weights, moments and outer state, when the same plan saved them.
    std::optional<std::vector<std::byte>> mine;
    if (!c.weights_only && info.plan_hash == ctx.plan_hash) mine = checkpoint::read_private_state(dir, ctx.rank);
    if (mine) {
      runner.load_private_state(*mine);
    } else {
      runner.reset_private_state();
      if (log)
        fmt::print("resume: {} holds no outer state for this plan; every replica starts from its weights and the "
                   "outer momentum from zero\n", dir);
    }
  }
  if (c.weights_only) {
    if (log)
      fmt::print("resume: loaded the weights of {}{} (step {}); fresh optimizer, starting at step 0\n", dir, via,
                 info.step);
    return 0;
  }
  if (log && info.step >= spec.train.steps)
    fmt::print("resume: {} is at step {}, train.steps is {}: nothing left to train\n", dir, info.step,
               spec.train.steps);
  // The loader continues the data stream where the checkpoint left it, whatever the plan.
  const DataResume data = data_resume_of(info, spec.train.seq_len);
  runner.set_data_origin(info.step, data.sequences);
  if (log && !data.note.empty()) fmt::print("resume: {}\n", data.note);
  if (log && !info.precision.empty() && info.precision != runner.precision_record())
    fmt::print("resume: {} was saved by a {} run, this one trains in {}: the fp32 master weights and AdamW moments "
               "carry over as saved\n", dir, info.precision, runner.precision_record());
  if (log)
    fmt::print("resume: continuing from {}{} at step {} ({} tokens seen; saved by {} rank{}{}; loaded in {:.2f} s)\n",
               dir, via, info.step, info.tokens_seen, info.world, info.world == 1 ? "" : "s",
               info.plan_hash == ctx.plan_hash ? ", same plan" : ", another plan: resharded",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return info.step;
}

void load_init_from(const spec::JobSpec& spec, const ResumePoint& resume, parallel::StepRunner& runner,
                    const LoopContext& ctx) {
  const std::string& dir = spec.checkpoint.init_from;
  if (dir.empty()) return;
  if (resume.checkpoint) {
    if (ctx.rank == 0)
      fmt::print("init-from: not loading {}: the run resumes {}\n", dir, resume.checkpoint->dir);
    return;
  }
  const auto t0 = std::chrono::steady_clock::now();
  const checkpoint::SafetensorsReader in(dir);
  for (const checkpoint::ShardState& st : runner.shard_states())  // each model chunk's layers
    checkpoint::load_hf_shard(in, *st.config, {st.params, st.layout->size()});
  runner.upload_shard_state();
  runner.reset_private_state();
  if (ctx.rank == 0)
    fmt::print("init-from: started from the weights of the Hugging Face checkpoint {} ({} safetensors file(s); "
               "loaded in {:.2f} s)\n", dir, in.files(),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

// A save in flight: its writer thread over the saver's copy of the shard.
struct CheckpointSaver::Pending {
  checkpoint::SaveContext ctx;
  std::vector<checkpoint::ShardState> states;  // per model chunk; point into the saver's copies
  std::future<checkpoint::CheckpointFile> file;
  std::vector<std::byte> private_state;  // the runner's, as of the step saved
  int generation = 0;                    // LoopContext::save_members' when it started
  double pause_s = 0;  // copy + prepare, then + wait + commit
  double write_s = 0;  // the writer thread's time
};

CheckpointSaver::CheckpointSaver(const spec::JobSpec& spec, const LoopContext& ctx, std::string run_id,
                                 checkpoint::RunTokenizer tokenizer)
    : spec_(spec), ctx_(ctx), run_id_(std::move(run_id)), tokenizer_(std::move(tokenizer)) {}

CheckpointSaver::~CheckpointSaver() {
  if (pending_ && pending_->file.valid()) pending_->file.wait();
}

void CheckpointSaver::after_step(parallel::StepRunner& runner, int64_t done, bool last) {
  if (pending_) finish();
  if (!due(done) || refused(done)) return;
  // After the last step no step follows to hide a background write behind: save() writes the
  // live buffers now (no copy), as the end of every run does.
  if (spec_.checkpoint.background_write && !last) start(runner, done);
  else save(runner, done);
  if (ctx_.mirror && !last) mirror(runner, done);
}

void CheckpointSaver::mirror(parallel::StepRunner& runner, int64_t done) {
  const auto t0 = std::chrono::steady_clock::now();
  // The background save's copy when one started (the writer only reads it too): no second
  // copy of the shard off the device.
  if (pending_ && pending_->ctx.step == done) ctx_.mirror(pending_->states, pending_->ctx);
  else ctx_.mirror(runner.shard_states(), context(runner, done));
  if (ctx_.rank == 0)
    fmt::print("peer copies of step {}: each rank's shard kept and sent to its buddy on another node in {:.2f} s\n", done,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  std::fflush(stdout);
}

namespace {

// What a save after `done` steps records (shared by the saver and the space check, so the
// manifest the check prices is the one a save writes).
checkpoint::SaveContext save_context_of(const spec::JobSpec& spec, const LoopContext& ctx,
                                        const parallel::StepRunner& runner, int64_t done, const std::string& run_id,
                                        const checkpoint::RunTokenizer& tokenizer, const std::string& spec_text) {
  checkpoint::SaveContext c;
  c.rank = ctx.rank;
  c.world = ctx.world;
  c.store = ctx.store.get();
  c.step = done;
  c.data_sequences = runner.data_position(done);
  c.data_seq_len = spec.train.seq_len;
  c.tokens_seen = c.data_sequences >= 0 ? c.data_sequences * spec.train.seq_len : done * runner.tokens_per_step();
  c.seed = spec.job.seed;
  c.model = parallel::gpt_config_of(spec);
  c.run_id = run_id;
  c.job_spec_text = spec_text;
  c.plan_text = ctx.plan_text.empty() ? "single process: tp1 x pp1 x dp1" : ctx.plan_text;
  c.plan_hash = ctx.plan_hash;
  c.tokenizer = tokenizer;
  c.precision = runner.precision_record();
  c.keep = spec.checkpoint.keep;
  if (ctx.save_members) {
    // Elastic replicas: saved by the current generation. While a replica is missing the saving
    // ranks are fewer than the plan's: the checkpoint resumes as one of another plan (every
    // replica from replica 0's shard, which is all an elastic sync job holds).
    const LoopContext::SaveMembers m = ctx.save_members();
    c.rank = m.rank;
    c.world = m.world;
    c.give_up = m.give_up;
    if (m.world != ctx.world) {
      c.plan_hash = 0;
      c.plan_text += fmt::format("saved by the {} ranks of the replicas that remained, of the plan's {}\n", m.world,
                                 ctx.world);
    }
  }
  // Ranks reach a commit within a step of each other; the collective time-out bounds the wait.
  c.timeout_s = std::max(spec.cluster.timeout_s, 60.0);
  return c;
}

}  // namespace

checkpoint::SaveContext CheckpointSaver::context(const parallel::StepRunner& runner, int64_t done) {
  if (spec_text_.empty()) spec_text_ = spec::resolved_spec_text(spec_);
  return save_context_of(spec_, ctx_, runner, done, run_id_, tokenizer_, spec_text_);
}

checkpoint::SpaceNeed checkpoint_space_need(const spec::JobSpec& spec, parallel::StepRunner& runner,
                                            const LoopContext& ctx, const checkpoint::RunTokenizer& tokenizer,
                                            uint64_t final_weights) {
  // The largest step numbers a manifest of this run holds; a run id is always 16 digits.
  const checkpoint::SaveContext c = save_context_of(spec, ctx, runner, spec.train.steps, std::string(16, '0'),
                                                    tokenizer, spec::resolved_spec_text(spec));
  const uint64_t private_bytes = runner.has_private_state() ? runner.private_state().size() : 0;
  const uint64_t mine = checkpoint::checkpoint_bytes_of_rank(runner.shard_shapes(), c, private_bytes);
  // Every rank's share through the job-wide maximum: each fills its own slot (doubles hold
  // integers exactly up to 2^53 bytes).
  std::vector<double> slots(static_cast<size_t>(ctx.world), 0.0);
  slots[static_cast<size_t>(ctx.rank)] = static_cast<double>(mine);
  if (ctx.max_over_ranks && ctx.world > 1) slots = ctx.max_over_ranks(std::move(slots));
  checkpoint::SpaceNeed need;
  for (double b : slots) need.checkpoint += static_cast<uint64_t>(b);
  need.world = ctx.world;
  need.files = ctx.world * (runner.has_private_state() ? 2 : 1) + 2;
  need.final_weights = final_weights;
  need.keep = spec.checkpoint.keep;
  return need;
}

void check_space(const spec::JobSpec& spec, checkpoint::SpaceNeed need, const ResumePoint& resume, bool first) {
  const spec::RunPaths paths = spec::RunPaths::of(spec);
  // A resumed run continues at its checkpoint's step; its complete checkpoints already on disk
  // are pruned as new ones commit, so they count towards checkpoint.keep, not the free space.
  const bool resumed = resume.checkpoint && !spec.checkpoint.weights_only;
  const int64_t start = resumed ? resume.checkpoint->step : 0;
  int64_t existing = 0;
  if (resumed && !resume.checkpoint->run_id.empty())
    for (const checkpoint::StepFolder& f : checkpoint::list_step_folders(paths.checkpoints))
      existing += f.complete && f.run_id == resume.checkpoint->run_id;
  need.retained = checkpoint::checkpoints_to_hold(start, spec.train.steps, spec.checkpoint.interval,
                                                  spec.checkpoint.keep, existing);
  if (need.retained == 0) {  // nothing left to train: no checkpoint is written
    need.checkpoint = 0;
    need.retained = 1;
  }
  const std::string ckpt_key = spec.checkpoint.dir.empty() ? "checkpoint.dir (default <job.output_dir>/checkpoints)"
                                                           : "checkpoint.dir";
  const checkpoint::FolderSpace ckpt = checkpoint::folder_space(ckpt_key, paths.checkpoints);
  std::optional<checkpoint::FolderSpace> out;
  if (first) out = checkpoint::folder_space("job.output_dir", paths.output_dir);
  const checkpoint::SpaceVerdict v = checkpoint::judge_space(need, ckpt, out ? &*out : nullptr);
  if (!v.error.empty()) throw UserError(v.error);
  if (first)
    for (const std::string& w : v.warnings) fmt::print(stderr, "holmes-train: {}\n", w);
}

void CheckpointSaver::save(parallel::StepRunner& runner, int64_t done) {
  if (pending_) finish();
  if (done == last_saved_) return;
  // A save whose wait ended on a lost member is made again by the survivors, who all hold the
  // state after `done` (the regroup changes who saves, not what).
  for (;;) {
    if (refused(done)) return;
    // Nothing to overlap with: write the live buffers, no copy.
    const auto t0 = std::chrono::steady_clock::now();
    const checkpoint::SaveContext c = context(runner, done);
    const std::string ckpt_dir = spec::RunPaths::of(spec_).checkpoints;
    const std::string dir = checkpoint::checkpoint_step_dir(ckpt_dir, done);
    try {
      checkpoint::prepare_checkpoint(ckpt_dir, c);
      const checkpoint::CheckpointFile file = checkpoint::write_checkpoint_shard(dir, runner.shard_states(), c);
      if (runner.has_private_state()) checkpoint::write_private_state(dir, ctx_.rank, runner.private_state());
      commit_hook(done);
      const checkpoint::SaveResult r = checkpoint::commit_checkpoint(ckpt_dir, file, c);
      last_saved_ = done;
      report(r, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), "");
      return;
    } catch (const comm::StoreWaitAbandoned& e) {
      abandon(done, dir, e);
    }
  }
}

void CheckpointSaver::commit_hook(int64_t done) const {
  TestSignal::from_environment(ctx_.hook_rank >= 0 ? ctx_.hook_rank : ctx_.rank).raise_at_commit(done);
}

void CheckpointSaver::abandon(int64_t done, const std::string& dir, const comm::StoreWaitAbandoned& e) {
  if (!ctx_.save_abandoned) throw;  // called inside the handler of `e`
  // Rank 0 writes the marker once every rank's file entry came: a member lost after that
  // leaves a whole checkpoint behind.
  if (ctx_.leading()) {
    const bool whole = std::filesystem::exists(std::filesystem::path(dir) / checkpoint::kMarkerName);
    fmt::print("checkpoint after step {} {}: a rank it waited for will not come ({})\n", done,
               whole ? "committed, every shard written" : "not saved", e.what());
    std::fflush(stdout);
  }
  ctx_.save_abandoned(e.what());
}

bool CheckpointSaver::refused(int64_t done) {
  const std::string why = ctx_.save_refused ? ctx_.save_refused() : "";
  if (why.empty()) return false;
  if (!refusal_told_ && ctx_.leading()) fmt::print("checkpoint after step {} not saved: {}\n", done, why);
  refusal_told_ = true;
  return true;
}

void CheckpointSaver::start(parallel::StepRunner& runner, int64_t done) {
  const auto t0 = std::chrono::steady_clock::now();
  auto p = std::make_unique<Pending>();
  p->ctx = context(runner, done);
  if (ctx_.save_members) p->generation = ctx_.save_members().generation;
  // The copy the writer reads while the next step changes the live buffers (kept for the
  // next save: no fresh pages to fault in).
  p->states = runner.shard_states();  // the live buffers, every model chunk's
  copies_.resize(p->states.size());
  for (size_t k = 0; k < p->states.size(); ++k) {
    checkpoint::ShardState& st = p->states[k];
    Copy& copy = copies_[k];
    copy.params.assign(st.params, st.params + st.layout->size());
    copy.m.assign(st.exp_avg, st.exp_avg + st.owned_size());
    copy.v.assign(st.exp_avg_sq, st.exp_avg_sq + st.owned_size());
    st.params = copy.params.data();
    st.exp_avg = copy.m.data();
    st.exp_avg_sq = copy.v.data();
  }
  if (runner.has_private_state()) p->private_state = runner.private_state();
  const int rank = ctx_.rank;
  std::string dir;
  try {
    dir = checkpoint::prepare_checkpoint(spec::RunPaths::of(spec_).checkpoints, p->ctx);
  } catch (const comm::StoreWaitAbandoned& e) {
    // No shard written yet: the survivors regroup and save at the next interval.
    return abandon(done, checkpoint::checkpoint_step_dir(spec::RunPaths::of(spec_).checkpoints, done), e);
  }
  Pending* raw = p.get();
  p->file = std::async(std::launch::async, [raw, dir, rank] {
    const auto w0 = std::chrono::steady_clock::now();
    checkpoint::CheckpointFile f = checkpoint::write_checkpoint_shard(dir, raw->states, raw->ctx);
    if (!raw->private_state.empty()) checkpoint::write_private_state(dir, rank, raw->private_state);
    raw->write_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
    return f;
  });
  p->pause_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  pending_ = std::move(p);
  last_saved_ = done;
}

void CheckpointSaver::finish() {
  std::unique_ptr<Pending> p = std::move(pending_);
  const auto t0 = std::chrono::steady_clock::now();
  const checkpoint::CheckpointFile file = p->file.get();  // rethrows a write error
  // Elastic: a replica lost while this was written would never send its part; the save is
  // left uncommitted (a resume never reads it) and the loop goes on without it. The meeting in
  // save_refused finds such a loss; a save begun under another generation is not committed.
  if (refused(p->ctx.step)) return;
  if (ctx_.save_members) {
    const LoopContext::SaveMembers now = ctx_.save_members();
    if (now.generation != p->generation) {
      if (ctx_.leading())
        fmt::print("checkpoint after step {} not saved: {} while it was written (its commit waits for the ranks that "
                   "began it); the next one is saved by the ranks of the new generation\n", p->ctx.step,
                   now.world < p->ctx.world   ? "a replica was lost"
                   : now.world > p->ctx.world ? "a replica rejoined"
                                              : "the ranks regrouped after a failure that every replica survived");
      return;
    }
  }
  checkpoint::SaveResult r;
  commit_hook(p->ctx.step);
  try {
    r = checkpoint::commit_checkpoint(spec::RunPaths::of(spec_).checkpoints, file, p->ctx);
  } catch (const comm::StoreWaitAbandoned& e) {
    return abandon(p->ctx.step, checkpoint::checkpoint_step_dir(spec::RunPaths::of(spec_).checkpoints, p->ctx.step), e);
  }
  const double pause = p->pause_s + std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  report(r, pause, fmt::format("; written in {:.2f} s in the background", p->write_s));
}

void CheckpointSaver::report(const checkpoint::SaveResult& r, double pause_s, const std::string& note) const {
  if (ctx_.leading())
    fmt::print("saved checkpoint {} in {:.2f} s ({:.1f} MB{})\n", std::filesystem::path(r.dir).filename().string(),
               pause_s, static_cast<double>(r.total_bytes) / 1e6, note);
  std::fflush(stdout);
}

TestSignal TestSignal::from_environment(int rank) {
  TestSignal t;
  const char* hook = std::getenv("HOLMES_TEST_SIGNAL_AFTER_STEP");
  if (hook == nullptr) return t;
  // STEP:NAME, or STEP:NAME:RANK for another rank than 0.
  const std::string h = hook;
  const auto colon = h.find(':');
  const auto second = colon == std::string::npos ? std::string::npos : h.find(':', colon + 1);
  const auto third = second == std::string::npos ? std::string::npos : h.find(':', second + 1);
  const std::string name = colon == std::string::npos ? "" : h.substr(colon + 1, second - colon - 1);
  const int target = second == std::string::npos ? 0 : std::atoi(h.substr(second + 1, third - second - 1).c_str());
  const std::string where = third == std::string::npos ? "" : h.substr(third + 1);
  t.signal = name == "KILL" ? SIGKILL : name == "TERM" ? SIGTERM : name == "USR1" ? SIGUSR1 : name == "STOP" ? SIGSTOP : 0;
  t.at_commit = where == "commit";
  if (t.signal == 0 || (third != std::string::npos && !t.at_commit) || (t.at_commit && t.signal != SIGKILL && t.signal != SIGSTOP))
    throw UserError(fmt::format("HOLMES_TEST_SIGNAL_AFTER_STEP: '{}' is not accepted, expected STEP:KILL, STEP:TERM, "
                                "STEP:USR1 or STEP:STOP, each optionally followed by :RANK, and KILL or STOP by "
                                ":RANK:commit", h));
  if (rank != target) return TestSignal{};
  t.step = std::atoll(h.substr(0, colon).c_str());
  return t;
}

void TestSignal::raise_if(int64_t done, bool before_sums) const {
  // A stop signal during step `done`, before its job-wide sums (which carry it); a kill
  // after the step (a crash, also while a checkpoint is being written).
  const bool after = signal == SIGKILL || signal == SIGSTOP;  // a crash or a freeze: after the step
  if (signal == 0 || at_commit || done != step || before_sums != !after) return;
  std::fflush(stdout);
  std::raise(signal);
}

void TestSignal::raise_at_commit(int64_t step_saved) const {
  if (signal == 0 || !at_commit || step_saved != step) return;
  std::fflush(stdout);
  std::raise(signal);
}

}  // namespace holmes::train
