// Stragglers: a rank (or a replica) whose own compute is persistently slower than that of its
// peers doing the same work. Rank 0 feeds the detector each rank's mean compute per step (the
// forward and backward passes without their waits on communication, StepStats::compute_ms),
// as the job-wide log figures bring it (job_figures.hpp: one slot per rank in the same small
// reduction), and the detector says who became or stopped being a straggler. Pure: the log
// (train_log.hpp) prints and records what it says. docs/training.md, "Stragglers".
//
// Peers. Ranks do the same work when their plan coordinates agree on every axis but the data-
// parallel one and the replica one (same pipeline stage, same tensor slice): each rank is
// compared with the median of its peers' figures. Each replica (parallel.replicas > 1, every
// replica runs the same plan) is compared by the mean over its ranks with the median of the
// other replicas' means. A rank without a peer (a pipeline of one data-parallel rank per
// stage) or a single replica is never compared.
//
// Persistence. A rank or replica is slower on a line when its figure exceeds the median of its
// peers' by more than `threshold` (ratio > 1 + threshold); it becomes a straggler after
// `lines` consecutive slower lines (a blip is not named), since the first step those lines
// cover, and stops being one after `lines` consecutive lines back at or under that bound.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/plan/plan.hpp"

namespace holmes::train {

// What the detector knows of one rank: which ranks do the same work and where it runs.
struct RankWork {
  int peer_class = 0;  // ranks of one class do the same work (plan coordinates but dp and replica)
  int replica = 0;     // parallel.replicas > 1: its replica (sync or diloco); else 0
  std::string where;   // "node n2, stage 1, replica 0", for the log
};
// One entry per rank of `plan`, in rank order.
std::vector<RankWork> rank_work_of(const plan::Plan& plan);

struct StragglerRule {
  double threshold = 0.2;  // log.straggler_threshold: slower than the peers' median by this share
  int lines = 3;           // log.straggler_lines: consecutive log lines to become / stop being one
};

enum class StragglerKind { kRank, kReplica };

// A rank or replica named a straggler.
struct Straggler {
  StragglerKind kind = StragglerKind::kRank;
  int id = 0;           // the rank or the replica
  double ratio = 0;     // its figure over its peers' median, on the latest line that compared it
  double worst = 0;     // the largest such ratio while it was named
  int64_t since = 0;    // the first step (1-based) of the first of the lines that named it
  int64_t until = -1;   // the last step of the line that ended it; -1 while it is one
  int peers = 0;        // how many ranks (replicas) it was compared with on that line
};

// What one line changed: `who` became a straggler (recovered false) or stopped being one.
struct StragglerEvent {
  Straggler who;
  bool recovered = false;
};

class StragglerDetector {
 public:
  // `ranks`: one entry per rank (rank_work_of); `start`: the steps already taken before the
  // first line it will see (a resumed run's step), so that the first line covers start + 1 on.
  StragglerDetector(std::vector<RankWork> ranks, StragglerRule rule, int64_t start = 0);

  // One line's figures: each rank's mean compute ms per step over the steps after the previous
  // line's up to `through` (1-based; index = rank; a value <= 0 or not finite: no figure, that
  // rank is neither compared nor a peer on this line). Returns what changed, ranks first.
  std::vector<StragglerEvent> observe(int64_t through, const std::vector<double>& compute_ms);

  // The stragglers now, ranks first, each by id.
  std::vector<Straggler> current() const;
  // Everyone named during the run (current ones with until -1), in the order they were named.
  const std::vector<Straggler>& history() const { return history_; }
  // Whether any rank or replica has peers to be compared with.
  bool compares() const;
  int ranks() const { return static_cast<int>(ranks_.size()); }
  const RankWork& rank(int r) const { return ranks_.at(static_cast<size_t>(r)); }
  int replicas() const { return replicas_; }
  const StragglerRule& rule() const { return rule_; }

 private:
  // A rank or replica's run of slower and of back-under lines.
  struct Track {
    int over = 0, under = 0;  // consecutive lines above / at or under the bound
    int64_t first_over = 0;   // the first step of the first line of `over`
    int named = -1;           // index into history_ while it is a straggler
  };
  void update(Track& t, StragglerKind kind, int id, double ratio, int peers, int64_t first, int64_t through,
              std::vector<StragglerEvent>& events);

  std::vector<RankWork> ranks_;
  StragglerRule rule_;
  int replicas_ = 1;
  int64_t covered_ = 0;  // the last step the previous line covered
  std::vector<Track> rank_tracks_, replica_tracks_;
  std::vector<Straggler> history_;
};

// "rank 3 (node n2, stage 1) 1.45x its 3 peers' compute since step 120", or for a replica
// "replica 1 (ranks 2, 3) 1.30x the other 2 replicas' mean compute since step 40".
std::string describe_straggler(const StragglerDetector& d, const Straggler& s);
// A recovery: "rank 3 (node n2, stage 1) back within 20% of its peers' compute at step 180
// (a straggler from step 120, at worst 1.52x)".
std::string describe_recovery(const StragglerDetector& d, const Straggler& s);
// For the run's summary: "rank 3 (node n2, stage 1) from step 120 to the end (or: to step
// 180), at worst 1.52x its 3 peers' compute".
std::string describe_spell(const StragglerDetector& d, const Straggler& s);

}  // namespace holmes::train
