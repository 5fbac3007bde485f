#include "engine/train/checkpoint_loop.hpp"

#include <fmt/format.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>

#include "engine/launch/signals.hpp"
#include "engine/spec/errors.hpp"
#include "engine/spec/load.hpp"
#include "engine/spec/schema.hpp"
#include "engine/train/checkpoint.hpp"
#include "engine/train/trainer.hpp"

namespace holmes::train {

std::string resolved_spec_text(const spec::JobSpec& spec) {
  spec::LoadedSpec loaded{spec, {}};
  for (const auto& f : spec::schema()) loaded.origin[f.path] = {"training run", 0};
  return spec::print_resolved(loaded);
}

int64_t resume_from_checkpoint(const spec::JobSpec& spec, StepRunner& runner, const LoopContext& ctx) {
  const auto& c = spec.checkpoint;
  if (c.resume == "none") return 0;
  const bool log = ctx.rank == 0;
  std::string dir = c.resume;
  if (c.resume == "auto") {
    std::vector<std::string> skipped;
    const auto latest = find_latest_checkpoint(spec.checkpoint_dir(), &skipped);
    if (log)
      for (const auto& s : skipped) fmt::print("resume: skipping incomplete checkpoint {} (no COMMITTED marker)\n", s);
    if (!latest) {
      if (log) fmt::print("resume: no complete checkpoint in {}; starting fresh\n", spec.checkpoint_dir());
      return 0;
    }
    dir = *latest;
  }
  const CheckpointInfo info = open_checkpoint(dir);
  ShardState st = runner.shard_state();
  load_shard_state(info, gpt_config_of(spec), st, !c.weights_only);
  if (c.weights_only) {
    if (log) fmt::print("resume: loaded the weights of {} (step {}); fresh optimizer, starting at step 0\n", dir, info.step);
    return 0;
  }
  if (log)
    fmt::print("resume: continuing from {} at step {} ({} tokens seen; saved by {} rank{}{})\n", dir, info.step,
               info.tokens_seen, info.world, info.world == 1 ? "" : "s",
               info.plan_hash == ctx.plan_hash ? ", same plan" : ", another plan: resharded");
  return info.step;
}

void CheckpointSaver::save(StepRunner& runner, int64_t done) {
  if (done == last_saved_) return;
  if (spec_text_.empty()) spec_text_ = resolved_spec_text(spec_);
  SaveContext c;
  c.rank = ctx_.rank;
  c.world = ctx_.world;
  c.store = ctx_.store.get();
  c.step = done;
  c.tokens_seen = done * runner.tokens_per_step();
  c.seed = spec_.job.seed;
  c.model = gpt_config_of(spec_);
  c.job_spec_text = spec_text_;
  c.plan_text = ctx_.plan_text.empty() ? "single process: tp1 x pp1 x dp1" : ctx_.plan_text;
  c.plan_hash = ctx_.plan_hash;
  c.keep = spec_.checkpoint.keep;
  const SaveResult r = save_checkpoint(spec_.checkpoint_dir(), runner.shard_state(), c);
  last_saved_ = done;
  if (ctx_.rank == 0)
    fmt::print("saved checkpoint {} in {:.2f} s ({:.1f} MB)\n", std::filesystem::path(r.dir).filename().string(),
               r.seconds, static_cast<double>(r.total_bytes) / 1e6);
  std::fflush(stdout);
}

int agreed_stop_signal(const LoopContext& ctx) {
  const double sig = launch::stop_signal();
  return static_cast<int>(ctx.max_over_ranks ? ctx.max_over_ranks(sig) : sig);
}

void maybe_raise_test_signal(const LoopContext& ctx, int64_t done) {
  const char* hook = std::getenv("HOLMES_TEST_SIGNAL_AFTER_STEP");
  if (hook == nullptr || ctx.rank != 0) return;
  const std::string h = hook;
  const auto colon = h.find(':');
  if (colon == std::string::npos || std::atoll(h.substr(0, colon).c_str()) != done) return;
  const std::string name = h.substr(colon + 1);
  const int sig = name == "KILL" ? SIGKILL : name == "TERM" ? SIGTERM : name == "USR1" ? SIGUSR1 : 0;
  if (sig == 0) throw UserError(fmt::format("HOLMES_TEST_SIGNAL_AFTER_STEP: signal '{}' is not accepted, expected "
                                            "KILL, TERM or USR1", name));
  std::fflush(stdout);
  std::raise(sig);
}

}  // namespace holmes::train
