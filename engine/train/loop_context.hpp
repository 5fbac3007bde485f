// Where the training loop runs (run.hpp): which rank, how many, the job-wide collective and
// the store the checkpoint code coordinates through. Its own header so that the loop and its
// checkpoint steps (checkpoint_loop.hpp) both include it without including each other.
#pragma once

#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "comm/store.hpp"
#include "engine/train/peer_copies.hpp"
#include "engine/train/stragglers.hpp"

namespace holmes::train {

// Where the loop runs. Default: one process.
struct LoopContext {
  int rank = 0;
  int world = 1;
  int nodes = 1;
  // Collective over all ranks: the element-wise maximum of `v` (identity when empty = single
  // process). The loop calls it on every rank at the same steps with the job-wide figures
  // packed together (memory, communication share, stop signal; job_figures.hpp).
  std::function<std::vector<double>(std::vector<double>)> max_over_ranks;
  // The same collective started on a thread of its own (its future holds the result), for
  // the log lines whose figures need not block the loop; empty: every reduction blocks. The
  // loop waits for it before any other use of the group (FigureExchange).
  std::function<std::future<std::vector<double>>(std::vector<double>)> start_max_over_ranks;
  // Fails a reduction start_max_over_ranks started, at once (the world group's abort): the
  // loop calls it when it is left by an exception with one still running.
  std::function<void()> abort_max_over_ranks;
  // parallel.elastic: why no checkpoint is saved or committed now ("" = it is). Collective: it
  // meets every rank over the world group first, so that a rank lost since is found there (and
  // the survivors regroup) rather than in a checkpoint commit's wait for that rank's files.
  // Empty function: every save goes on.
  std::function<std::string()> save_refused;
  // parallel.elastic with replicas: the ranks a checkpoint is saved by now, those of the current
  // generation (this rank's index among them, their number, the generation; every rank of the
  // start once every replica is there again). A save started under one generation is committed
  // only under the same. Empty: ctx.rank of ctx.world.
  struct SaveMembers {
    int rank = 0, world = 1, generation = 0;
    // The save's waits end when a member that has not come will not (SaveContext::give_up).
    comm::StoreGiveUp give_up;
  };
  std::function<SaveMembers()> save_members;
  // parallel.elastic with replicas: a save's wait ended because a member will not come
  // (comm::StoreWaitAbandoned, whose message it is given): the save is dropped, and this
  // regroups the survivors as a failed collective does. Empty: the error ends the run.
  std::function<void(const std::string&)> save_abandoned;
  // parallel.elastic with replicas: whether this rank leads the job now (ElasticSession::leads):
  // rank 0 until replica 0 is lost, then the first rank of the lowest replica left. The leader
  // writes the log, metrics.jsonl, the final weights and the checkpoint manifests. Empty: rank 0.
  std::function<bool()> leads;
  bool leading() const { return leads ? leads() : rank == 0; }
  // parallel.elastic with replicas: a failure is known and not yet resolved
  // (ElasticSession::unsettled): the leader holds its metrics rows until it is, so that a leader
  // dropped from the job (frozen and woken, say) writes none after the one that follows it.
  std::function<bool()> unsettled;
  // parallel.elastic: a rank that rejoined a running job trains from this step (0-based) on, its
  // state taken from a peer: no resume, no start-up collective, the job's log figures reduced
  // in step with the ranks that trained from the start. -1: a rank of the start.
  int64_t joined_at = -1;
  // Called on this rank after each step the loop finished, with the steps done (a re-plan
  // says how many steps its survivors redo); empty: nothing.
  std::function<void(int64_t)> on_step_done;
  // The rank HOLMES_TEST_SIGNAL_AFTER_STEP names this process by (checkpoint_loop.hpp): its rank
  // as the job started, which a re-planned generation numbers anew; -1: `rank`.
  int hook_rank = -1;
  std::shared_ptr<comm::Store> store;  // job store for coordination (checkpoints); null when single
  std::string plan_text;               // what the run runs under (for checkpoint manifests)
  uint64_t plan_hash = 0;
  std::string plan_json;               // rank 0 writes it to <output_dir>/plan.json (the run report reads it)
  // Every rank's peers and place (rank_work_of the plan), for rank 0's straggler check; empty
  // in a single process.
  std::vector<RankWork> ranks;
  // A single pipeline that re-plans (peer_copies.hpp): at each checkpoint step but the last,
  // collective, after the save started: keep this rank's shard and copy it to its buddy.
  // Empty: no peer copies.
  std::function<void(std::span<const checkpoint::ShardState>, const checkpoint::SaveContext&)> mirror;
  // A re-planned generation, collective, once the run folder is claimed: the peer copies to
  // load instead of the folder's newest checkpoint (of step `disk_step`, -1 none), or nullopt.
  std::function<std::optional<PeerSource>(int64_t disk_step)> peer_source;
};

}  // namespace holmes::train
