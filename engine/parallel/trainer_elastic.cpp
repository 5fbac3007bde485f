// The elastic side of the trainer (parallel.elastic, docs/elastic.md): the outer sync redone
// over the survivors after a loss (elastic sync: the whole step), the sums across replicas
// repeated, the in-place regroup, and the state a rejoining replica takes from a peer.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "comm/errors.hpp"
#include "engine/parallel/cpu_clock.hpp"
#include "engine/parallel/trainer.hpp"

namespace holmes::parallel {

void Trainer::elastic_outer_step(int64_t done, float* params) {
  // overlap 0 (the spec's rule for elastic): one fragment due at most (H >= F), synced now.
  const std::vector<int> due = outer_->due(done);
  if (due.size() != 1)
    throw std::logic_error(fmt::format("Trainer: {} fragments due after step {} in an elastic job", due.size(), done));
  const auto t0 = std::chrono::steady_clock::now();
  const double cpu0 = process_cpu_ms();
  for (;;) {
    // What the exchange changes before it is applied: the error-feedback residuals alone
    // (anchor, momentum and params move only in apply_fragment).
    const OuterSync::Residuals before = outer_->residuals();
    std::string what;
    try {
      outer_->exchange_fragment(due.front(), params);
      kill_in_outer_sync(done, "verdict");
      // Also with one replica left: its verdict is where lost replicas are admitted back.
      if (recovery_->exchange_complete(done - 1)) break;
      what = fmt::format("another replica failed in the outer exchange after step {}", done);
    } catch (const comm::CommError& e) {
      what = e.what();
    }
    outer_->restore(before);
    regroup(recovery_->recover(done - 1, /*exchange=*/true, what), done - 1);
  }
  outer_->apply_fragment(due.front(), params);
  outer_->count_time(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(),
                     process_cpu_ms() - cpu0);
  // Replicas admitted by this exchange's verdict join at the start of the next step.
  if (recovery_->admitted(done - 1)) join_after_ = done - 1;
}

namespace {

constexpr uint32_t kJoinTag = 29;  // the state a joining replica takes from a peer

}  // namespace

void Trainer::share_state(const std::vector<int>& joined) {
  // [private_state() bytes][origin step, sequence as int64] as 4-byte words.
  std::vector<std::byte> bytes = private_state();
  int64_t origin[2] = {origin_.step, origin_.sequence};
  const size_t head = bytes.size();
  bytes.resize(head + sizeof(origin));
  std::memcpy(bytes.data() + head, origin, sizeof(origin));
  std::vector<float> words(bytes.size() / 4);
  std::memcpy(words.data(), bytes.data(), bytes.size());
  Group& outer = groups_->group(schedule::Axis::kReplica);
  const int me = c_[schedule::Axis::kReplica];
  const bool joining = std::find(joined.begin(), joined.end(), me) != joined.end();
  // The sender: the first coordinate that trained on (a rejoining replica 0 comes back as
  // coordinate 0 and takes the state of the next).
  int sender = 0;
  while (std::find(joined.begin(), joined.end(), sender) != joined.end()) ++sender;
  if (me != sender && !joining) return;
  outer.run_host([&](comm::ProcessGroup& pg) {
    std::vector<comm::P2POp> ops;
    if (joining) ops.push_back({comm::P2POp::kRecv, {words.data(), words.size()}, sender, kJoinTag});
    else
      for (int j : joined) ops.push_back({comm::P2POp::kSend, {words.data(), words.size()}, j, kJoinTag});
    pg.send_recv(ops);
  }).land();
  if (!joining) return dump_joined_state();
  std::memcpy(bytes.data(), words.data(), bytes.size());
  std::memcpy(origin, bytes.data() + head, sizeof(origin));
  // The sender's header names its replica; the state is this replica's from now on.
  const uint64_t mine = static_cast<uint64_t>(me);
  std::memcpy(bytes.data() + sizeof(uint64_t), &mine, sizeof(mine));
  bytes.resize(head);
  load_private_state(bytes);
  origin_ = {origin[0], origin[1]};
  dump_joined_state();
}

void Trainer::dump_joined_state() {
  // Test hook (docs/elastic.md): with HOLMES_TEST_DUMP_WEIGHTS=DIR the rank that sent its state
  // to a joining replica and the joining rank write it (private_state) to DIR/join-rank-<R>.bin.
  const char* dir = std::getenv("HOLMES_TEST_DUMP_WEIGHTS");
  if (dir == nullptr || *dir == '\0') return;
  const std::vector<std::byte> state = private_state();
  const std::string path = fmt::format("{}/join-rank-{}.bin", dir, plan_.rank);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  const bool ok = f && std::fwrite(state.data(), 1, state.size(), f) == state.size();
  if (f) std::fclose(f);
  if (!ok) throw std::runtime_error(fmt::format("HOLMES_TEST_DUMP_WEIGHTS: cannot write {}", path));
}

void Trainer::join_replicas(const ReplicaRegroup& r, int64_t step) {
  regroup(r, step);
  share_state(r.joined);
  recovery_->joined();
}

void Trainer::take_joiners(int64_t step) {
  try {
    const ReplicaRegroup r = recovery_->admit();
    regroup(r, step);
    share_state(r.joined);
    recovery_->joined();
  } catch (const comm::CommError& e) {
    // A joiner died (or never built its groups) after its admission. Every survivor meets it
    // here, all after step `step` (the world group of the join spans them all), and they go on
    // without its replica from that step; a sender's state is unchanged by a failed send.
    regroup(recovery_->recover(step, /*exchange=*/false, e.what()), step);
  }
}

void Trainer::across_replicas(int64_t step, const std::function<void()>& f) {
  for (;;) {
    try {
      f();
      return;
    } catch (const comm::CommError& e) {
      if (!recovery_) throw;
      regroup(recovery_->recover(step, /*exchange=*/false, e.what()), step);
    }
  }
}

void Trainer::hsdp_across(int64_t step, const std::function<void()>& f) {
  if (hsdp_failed_) return;
  try {
    f();
  } catch (const comm::CommError& e) {
    if (!recovery_) throw;
    recovery_->met_failure(step, e.what(), "taken up at the step's verdict, after the sums inside the replica");
    recovery_->refuse_update(step);
    hsdp_failed_ = e.what();
  }
}

void Trainer::redo_step(int64_t step, const std::string& what) {
  // Nothing of step `step` was applied (its update waits for the verdict): the survivors
  // regroup after step - 1, whose state every one of them holds.
  recovery_->refuse_update(step);
  regroup(recovery_->recover(step - 1, /*exchange=*/false, what), step - 1);
}

void Trainer::recover_replicas(const std::string& what) {
  if (!recovery_) throw std::logic_error("Trainer::recover_replicas without parallel.elastic");
  regroup(recovery_->recover(last_step_, /*exchange=*/false, what), last_step_);
}

void Trainer::regroup(const ReplicaRegroup& r, int64_t step) {
  using schedule::Axis;
  // Every survivor read step `step`'s sequences of the old layout; the new one starts after it.
  origin_ = {step + 1, data_position(step + 1)};
  const int before = c_.degree(Axis::kReplica), after = r.place.degree(Axis::kReplica);
  // The old outer groups stay alive until the outer sync that refers to them is replaced.
  const std::vector<std::unique_ptr<Group>> old = groups_->replace_replica_groups(r.place, r.outer);
  plan_.place = r.place;
  plan_.global_batch = plan_.global_batch / before * after;
  replicas_ = r.replicas;
  replica_id_ = r.replica;
  if (hsdp_) return;  // no outer state: the optimizer's moments are the replica's own
  auto next = std::make_unique<OuterSync>(plan_.outer, groups_->group(Axis::kReplica), groups_->group(Axis::kDp),
                                          gpt_->num_params(),
                                          &groups_->group(schedule::GroupKind{Axis::kReplica, schedule::Purpose::kSide}));
  const bool joining = !outer_;  // built as a replica alone: its state comes from a peer (share_state)
  if (outer_) next->adopt(*outer_);
  outer_ = std::move(next);
  if (joining) reset_outer();
}

}  // namespace holmes::parallel
