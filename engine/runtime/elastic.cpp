// The elastic session (elastic.hpp): announcements, registrations, the leader's decision and
// the groups of the next generation, all through the rendezvous store.
#include "engine/runtime/elastic.hpp"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "comm/errors.hpp"
#include "comm/gloo_group.hpp"
#include "comm/inproc_group.hpp"
#include "engine/launch/signals.hpp"
#include "engine/plan/nccl.hpp"
#include "engine/runtime/settle.hpp"

namespace holmes::runtime {

namespace {

using Clock = std::chrono::steady_clock;
using schedule::Axis;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

comm::Millis millis(double s) { return comm::Millis(static_cast<int64_t>(s * 1000)); }

bool contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

}  // namespace

namespace {

constexpr const char* kStartedKey = "elastic/started";        // counts the ranks that finished start-up
constexpr const char* kGenerationKey = "elastic/generation";  // draws the number of each new generation
constexpr const char* kOverKey = "elastic/over";              // set when the job ended: why (joiners stop)

}  // namespace

bool late_rank(comm::Store& store) { return store.add(kStartedKey, 0) > 0; }

MembershipDecision await_admission(comm::Store& store, const plan::Plan& plan, int rank, double timeout_s) {
  const std::string mine = fmt::format("elastic/join/{}", rank);
  const int replica = plan.ranks.at(rank).at[Axis::kReplica];
  store.remove(mine + "/admitted");
  comm::set_string(store, mine, "1");
  const double wait_s = std::max(600.0, 10 * timeout_s);
  std::vector<int> peers;  // the ranks of this replica: it is admitted only when all of them ask
  for (const plan::RankInfo& r : plan.ranks)
    if (r.at[Axis::kReplica] == replica) peers.push_back(r.rank);
  std::fprintf(stderr, "holmes-train: rank %d: elastic: this rank started after its job began; replica %d waits to be "
               "admitted at the survivors' next outer sync, once its rank(s) [%s] all asked (at most %.0f s)\n", rank,
               replica, fmt::format("{}", fmt::join(peers, ", ")).c_str(), wait_s);
  std::fflush(stderr);
  // Polled rather than one blocking get: a job that ended (or lost its quorum) says so in
  // kOverKey, and a joiner then stops at once instead of at the end of its wait.
  const auto deadline = Clock::now() + millis(wait_s);
  for (;;) {
    if (store.missing({mine + "/admitted"}).empty()) break;
    if (store.missing({kOverKey}).empty())
      throw ElasticStop(fmt::format("elastic: replica {} was not admitted: the running job ended ({})", replica,
                                    comm::get_string(store, kOverKey, millis(timeout_s))));
    if (Clock::now() > deadline)
      throw ElasticStop(fmt::format("elastic: replica {} was not admitted within {:.0f} s (no outer sync of the "
                                    "running job took it in: the job ended, lost its quorum, or rank(s) [{}] of this "
                                    "replica did not all ask)", replica, wait_s, fmt::join(peers, ", ")));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const int from = std::stoi(comm::get_string(store, mine + "/admitted", millis(timeout_s)));
  // Test hook (docs/elastic.md): HOLMES_TEST_EXIT_AFTER_ADMISSION=RANK makes that rank exit
  // (code 1) once admitted, before any group: a joiner lost during its join.
  if (const char* hook = std::getenv("HOLMES_TEST_EXIT_AFTER_ADMISSION"); hook && *hook && std::atoi(hook) == rank) {
    std::fprintf(stderr, "holmes-train: rank %d: HOLMES_TEST_EXIT_AFTER_ADMISSION: exiting once admitted\n", rank);
    std::fflush(stderr);
    std::_Exit(1);
  }
  return decode_decision(comm::get_string(store, fmt::format("elastic/g{}/admission", from), millis(timeout_s)));
}

void job_over(comm::Store& store, const std::string& why) { comm::set_string(store, kOverKey, why); }

ElasticSession::ElasticSession(Runtime& rt, const spec::JobSpec& spec)
    : rt_(rt), timeout_s_(spec.cluster.timeout_s), settle_s_(std::min(5.0, spec.cluster.timeout_s)),
      min_replicas_(spec.parallel.min_replicas), steps_(spec.train.steps) {
  for (const plan::RankInfo& r : rt.plan.ranks) members_.push_back({r.rank, r.at[Axis::kReplica]});
  replica_ = rt.plan.ranks.at(rt.rank).at[Axis::kReplica];
  start_members_ = members_;
  rt.store->add(kStartedKey, 1);
  heartbeat_ = std::make_unique<Heartbeat>(rt.store, rt.rank, heartbeat_period_s(timeout_s_));
}

ElasticSession::~ElasticSession() = default;

std::string ElasticSession::key(const std::string& name) const {
  return fmt::format("elastic/g{}/{}", generation_, name);
}

int ElasticSession::member_index() const {
  for (size_t i = 0; i < members_.size(); ++i)
    if (members_[i].rank == rt_.rank) return static_cast<int>(i);
  throw std::logic_error(fmt::format("rank {} is not a member of generation {}", rt_.rank, generation_));
}

int ElasticSession::first_rank() const {
  return std::min_element(members_.begin(), members_.end(),
                          [](const Member& a, const Member& b) { return a.rank < b.rank; })->rank;
}

std::optional<std::string> ElasticSession::wait_in_vain(const std::vector<int>& missing) {
  try {
    for (int i : missing) {
      const int rank = members_.at(static_cast<size_t>(i)).rank;
      if (const auto why = rank_gone(*rt_.store, rank, timeout_s_)) return fmt::format("rank {}: {}", rank, *why);
    }
    if (announced())
      return fmt::format("a failure was announced in generation {}: the survivors regroup", generation_);
  } catch (const comm::StoreError&) {
  }
  return std::nullopt;
}

comm::ProcessGroup& ElasticSession::world() { return world_ ? *world_ : rt_.world_group(); }

bool ElasticSession::announced() {
  const bool broken = rt_.store->add(key("broken"), 0) > 0;
  unsettled_ = unsettled_ || broken;
  return broken;
}

void ElasticSession::coming(int64_t step) {
  const std::string mine = key(fmt::format("coming/{}", rt_.rank));
  if (!rt_.store->missing({mine}).empty()) comm::set_string(*rt_.store, mine, std::to_string(step));
}

bool ElasticSession::exchange_complete(int64_t step) {
  comm::Store& store = *rt_.store;
  const std::string x = key(fmt::format("x{}", step));
  int64_t in = store.add(x, 1);
  const int n = static_cast<int>(members_.size());
  const int first = first_rank();
  if (rt_.rank == first) {
    // The one writer of the verdict: every member counted in, or a failure came first.
    // A member that is gone (liveness.hpp) ends the wait at once: a dead process's closed
    // connection, a frozen one's heartbeat older than the time-out.
    const auto deadline = Clock::now() + millis(timeout_s_);
    auto next_look = Clock::now() + std::chrono::milliseconds(200);
    bool whole = false;
    for (;;) {
      if (in >= n) {
        whole = true;
        break;
      }
      if (store.add(key("broken"), 0) > 0) break;
      if (Clock::now() > deadline) {
        store.add(key("broken"), 1);
        break;
      }
      if (Clock::now() > next_look) {
        next_look = Clock::now() + std::chrono::milliseconds(200);
        std::string gone;
        for (const Member& m : members_) {
          if (m.rank == rt_.rank) continue;
          if (const auto why = rank_gone(store, m.rank, timeout_s_)) {
            gone = fmt::format("rank {} of replica {}: {}", m.rank, m.replica, *why);
            break;
          }
        }
        if (!gone.empty()) {
          comm::set_string(store, key("why"), gone);
          store.add(key("broken"), 1);
          break;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      in = store.add(x, 0);
    }
    verdict_ = whole ? (admit_joiners(step).empty() ? "1" : "1 admit") : "0";
    comm::set_string(store, x + "/verdict", verdict_);
    verdict_step_ = step;
    return whole;
  }
  // The first rank writes the verdict; one that is gone (liveness.hpp) never will: verdict 0,
  // and the recovery finds its replica lost, without waiting out the time-out.
  verdict_ = "0";
  const auto deadline = Clock::now() + millis(timeout_s_ + settle_s_ + 5);
  try {
    for (;;) {
      try {
        store.wait({x + "/verdict"}, std::chrono::milliseconds(500));
        verdict_ = comm::get_string(store, x + "/verdict", millis(timeout_s_));
        break;
      } catch (const comm::StoreError&) {
        if (Clock::now() > deadline || rank_gone(store, first, timeout_s_)) break;
      }
    }
  } catch (const comm::StoreError&) {
  }
  verdict_step_ = step;
  return verdict_[0] == '1';
}

void ElasticSession::say_met(int64_t step, const std::string& what, const std::string& when,
                             const std::string& then) const {
  std::fflush(stdout);
  std::fprintf(stderr, "holmes-train: rank %d: elastic: %s (step %lld, %s); %s\n", rt_.rank, what.c_str(),
               static_cast<long long>(step + 1), when.c_str(), then.c_str());
  std::fflush(stderr);
}

void ElasticSession::met_failure(int64_t step, const std::string& what, const std::string& later) {
  say_met(step, what, wall_clock_text(), later);
}

void ElasticSession::refuse_update(int64_t step) {
  const int first = first_rank();
  try {
    // Announced at once: the verdict's writer stops waiting for the members to count in.
    rt_.store->add(key("broken"), 1);
    if (rt_.rank != first || verdict_step_ == step) return;
    comm::set_string(*rt_.store, key(fmt::format("x{}/verdict", step)), "0");
  } catch (const comm::StoreError& e) {
    throw ElasticStop(fmt::format("elastic: the rendezvous store, the arbiter of who goes on, failed: {}", e.what()));
  }
  verdict_step_ = step;
  verdict_ = "0";
}

std::vector<int> ElasticSession::asking_replicas() const {
  comm::Store& store = *rt_.store;
  std::vector<int> current, asking;
  for (const Member& m : members_) current.push_back(m.replica);
  for (const Member& m : start_members_) {
    if (contains(current, m.replica) || contains(asking, m.replica)) continue;
    std::vector<std::string> keys;
    for (const Member& o : start_members_)
      if (o.replica == m.replica) keys.push_back(fmt::format("elastic/join/{}", o.rank));
    if (store.missing(keys).empty()) asking.push_back(m.replica);  // else not every rank of it asks yet
  }
  return asking;
}

std::string ElasticSession::admit_joiners(int64_t step) {
  comm::Store& store = *rt_.store;
  // Test hook (docs/elastic.md): HOLMES_TEST_WAIT_FOR_JOINER=STEP makes the first rank wait at the
  // exchange after step STEP (at most cluster.timeout_s), while a replica is out, until every rank
  // of a lost replica asks to join, and admits no one before it, so a test admits it there
  // whatever the machine's speed (a joiner that asked early waits).
  const char* hook = std::getenv("HOLMES_TEST_WAIT_FOR_JOINER");
  if (hook && step + 1 < std::atoll(hook)) return "";
  if (hook && std::atoll(hook) == step + 1 && members_.size() < start_members_.size()) {
    const auto deadline = Clock::now() + millis(timeout_s_);
    while (asking_replicas().empty() && Clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // No admission after the last step: the joiners would wait for a next step that never comes.
  if (step + 1 >= steps_) return "";
  // Whole replicas only, as the quorum rule: a replica is admitted once every rank of it asked.
  const std::vector<int> joining = asking_replicas();
  std::vector<int> current, joiner_ranks;
  for (const Member& m : members_) current.push_back(m.replica);
  for (const Member& m : start_members_)
    if (contains(joining, m.replica)) joiner_ranks.push_back(m.rank);
  if (joining.empty()) return "";
  MembershipDecision d;
  d.go_on = true;
  d.step = step;
  for (const Member& m : start_members_)
    if (contains(current, m.replica) || contains(joining, m.replica)) d.ranks.push_back(m.rank);
  d.replicas = current;
  d.replicas.insert(d.replicas.end(), joining.begin(), joining.end());
  std::sort(d.replicas.begin(), d.replicas.end());
  d.replicas.erase(std::unique(d.replicas.begin(), d.replicas.end()), d.replicas.end());
  std::sort(d.ranks.begin(), d.ranks.end());
  d.lost_replicas = joining;  // in an admission: the replicas that come back
  d.generation = static_cast<int>(store.add(kGenerationKey, 1));
  const std::string text = encode_decision(d);
  comm::set_string(store, key("admission"), text);
  for (int r : joiner_ranks) {
    store.remove(fmt::format("elastic/join/{}", r));
    comm::set_string(store, fmt::format("elastic/join/{}/admitted", r), std::to_string(generation_));
  }
  return text;
}

parallel::ReplicaRegroup ElasticSession::layout(const MembershipDecision& d, const std::vector<int>& joined) const {
  parallel::ReplicaRegroup r;
  r.place = rt_.rank_plan.place;
  const auto at = std::find(d.replicas.begin(), d.replicas.end(), replica_) - d.replicas.begin();
  r.place.at[Axis::kReplica] = static_cast<int>(at);
  r.place.size[Axis::kReplica] = static_cast<int>(d.replicas.size());
  r.outer = outer_.get();
  r.replicas = d.replicas;
  r.replica = replica_;
  for (int replica : joined)
    r.joined.push_back(static_cast<int>(std::find(d.replicas.begin(), d.replicas.end(), replica) - d.replicas.begin()));
  return r;
}

bool ElasticSession::admitted(int64_t step) {
  if (verdict_step_ != step || verdict_ != "1 admit") return false;
  admission_ = decode_decision(comm::get_string(*rt_.store, key("admission"), millis(timeout_s_)));
  return true;
}

parallel::ReplicaRegroup ElasticSession::admit() {
  if (!admission_) throw std::logic_error("ElasticSession::admit without an admission");
  const MembershipDecision d = *admission_;
  admission_.reset();
  const std::vector<int> joined = d.lost_replicas;
  make_groups(d);
  std::fprintf(stderr, "holmes-train: rank %d: elastic: %s rejoin(s) after step %lld; generation %d: replicas [%s]\n",
               rt_.rank, describe_replicas(start_members_, joined).c_str(), static_cast<long long>(d.step + 1),
               generation_, fmt::format("{}", fmt::join(d.replicas, ", ")).c_str());
  std::fflush(stderr);
  return layout(d, joined);
}

void ElasticSession::joined() { world().barrier(); }

std::pair<parallel::ReplicaRegroup, int64_t> ElasticSession::join() {
  if (!rt_.admission) throw std::logic_error("ElasticSession::join on a rank that was not admitted at start-up");
  const MembershipDecision d = *rt_.admission;
  const std::vector<int> joined = d.lost_replicas;
  make_groups(d);
  std::fprintf(stderr, "holmes-train: rank %d: elastic: admitted after step %lld; generation %d: replicas [%s]\n",
               rt_.rank, static_cast<long long>(d.step + 1), generation_,
               fmt::format("{}", fmt::join(d.replicas, ", ")).c_str());
  std::fflush(stderr);
  return {layout(d, joined), d.step};
}

void ElasticSession::close_groups() {
  // Generation 0's groups are the start-up's; later ones are ours. Closing them (not only
  // aborting) ends the peers' waits on this rank at once.
  for (auto it = rt_.comms.begin(); it != rt_.comms.end();) {
    if (!spans_replicas(it->kind)) {
      ++it;
      continue;
    }
    it->group->abort();
    it = rt_.comms.erase(it);
  }
  for (auto* g : {&world_, &outer_})
    if (*g) (*g)->abort(), g->reset();
}

MembershipDecision ElasticSession::lead() {
  comm::Store& store = *rt_.store;
  std::vector<std::string> keys, coming;
  for (const Member& m : members_) {
    keys.push_back(key(fmt::format("alive/{}", m.rank)));
    coming.push_back(key(fmt::format("coming/{}", m.rank)));
  }
  // A member still beating (and not on its way out: a rank that failed inside its replica
  // leaves) is held up in a collective that will fail within its time-out (a peer of the frozen
  // rank, or a rank waiting on such a peer): waited for, within the bound, so that a replica
  // whose ranks are all alive is not dropped for being late.
  auto alive = [&](size_t i) {
    try {
      return beating(store, members_[i].rank, timeout_s_) && !left_on_purpose(store, members_[i].rank);
    } catch (const comm::StoreError&) {
      return false;
    }
  };
  const std::vector<std::string> missing =
      wait_for_registrations(store, keys, settle_s_, timeout_s_ + settle_s_, coming, alive);
  std::vector<Registration> regs;
  for (size_t i = 0; i < keys.size(); ++i)
    if (std::find(missing.begin(), missing.end(), keys[i]) == missing.end())
      regs.push_back({members_[i].rank, std::stoll(comm::get_string(store, keys[i], millis(timeout_s_)))});
  return decide_membership(members_, regs, min_replicas_);
}

void ElasticSession::make_groups(const MembershipDecision& d) {
  generation_ = d.generation;
  unsettled_ = false;
  std::vector<Member> kept;
  for (const Member& m : start_members_)
    if (contains(d.ranks, m.rank)) kept.push_back(m);
  members_ = kept;
  const bool single_machine = rt_.plan.hostnames.size() <= 1;
  auto make = [&](schedule::GroupKind kind) -> std::unique_ptr<comm::ProcessGroup> {
    const plan::Group* g = plan_group_of(rt_.plan, kind, rt_.rank);
    if (g == nullptr) return nullptr;
    comm::GroupSpec gs;
    gs.name = fmt::format("e{}/{}", generation_, plan::group_name(*g));
    for (int r : g->ranks)
      if (contains(d.ranks, r)) gs.global_ranks.push_back(r);
    gs.global_rank = rt_.rank;
    gs.timeout = millis(timeout_s_);
    gs.known_gone = liveness_of(rt_.store, timeout_s_);
    if (gs.global_ranks.size() > 1) return comm::make_gloo_group(rt_.store, gs, group_net(*g, single_machine));
    return comm::make_inproc_group(std::make_shared<comm::InProcessHub>(), gs);
  };
  world_ = make(plan::kWorldGroup);
  outer_ = make(plan::kOuterGroup);
  if (outer_ && outer_->size() == 1) outer_.reset();
}

parallel::ReplicaRegroup ElasticSession::recover(int64_t step, bool exchange, const std::string& what) {
  const auto t0 = Clock::now();
  const std::string when = wall_clock_text();
  comm::Store& store = *rt_.store;
  // The first rank's liveness watch may have named the member that is gone.
  std::string why;
  try {
    if (store.missing({key("why")}).empty()) why = " (" + comm::get_string(store, key("why"), millis(timeout_s_)) + ")";
  } catch (const comm::StoreError&) {
  }
  say_met(step, what + why, when, "the replicas decide who goes on");
  unsettled_ = true;
  MembershipDecision d;
  try {
    store.add(key("broken"), 1);
    const int first = first_rank();
    // The first rank met the failure inside an exchange it has not judged yet: its verdict is 0.
    if (exchange && rt_.rank == first && verdict_step_ != step) {
      comm::set_string(store, key(fmt::format("x{}/verdict", step)), "0");
      verdict_step_ = step;
    }
    close_groups();
    comm::set_string(store, key(fmt::format("alive/{}", rt_.rank)), std::to_string(step));
    if (store.add(key("leader"), 1) == 1) {
      d = lead();
      if (d.go_on) d.generation = static_cast<int>(store.add(kGenerationKey, 1));
      else job_over(store, "it stopped: " + d.reason);
      comm::set_string(store, key("decision"), encode_decision(d));
    } else {
      d = decode_decision(comm::get_string(store, key("decision"), millis(timeout_s_ + 2 * settle_s_ + 10)));
    }
  } catch (const comm::StoreError& e) {
    throw ElasticStop(fmt::format("elastic: the rendezvous store, the arbiter of who goes on, failed: {}", e.what()));
  }
  const std::vector<Member> before = members_;
  const std::string lost = describe_replicas(before, d.lost_replicas);
  if (!d.go_on)
    throw ElasticStop(fmt::format("elastic: the job cannot go on after losing {}: {}", lost.empty() ? "no replica" : lost,
                                  d.reason));
  if (!contains(d.ranks, rt_.rank) && contains(d.apart_replicas, replica_))
    throw ElasticStop(fmt::format("elastic: replica {} stood at step {} while replicas [{}] went on from step {} (it was "
                                  "held up: frozen or cut off); this rank stops, and may rejoin", replica_, step + 1,
                                  fmt::join(d.replicas, ", "), d.step + 1));
  if (!contains(d.ranks, rt_.rank)) {
    std::vector<int> mine;
    for (const Member& m : before)
      if (m.replica == replica_ && contains(d.missing_ranks, m.rank)) mine.push_back(m.rank);
    throw ElasticStop(fmt::format("elastic: replica {} lost rank(s) [{}] (not registered within the settle window); "
                                  "the other replicas go on without it, so this rank stops",
                                  replica_, fmt::join(mine, ", ")));
  }
  make_groups(d);
  const parallel::ReplicaRegroup r = layout(d, {});
  // Every rank may have registered (a peer held up only for a while, or a failure each saw alike).
  const std::string what_lost =
      lost.empty() ? std::string("no replica (every rank registered)")
                   : fmt::format("{} (missing rank(s) [{}]{})", lost, fmt::join(d.missing_ranks, ", "),
                                 d.apart_replicas.empty() ? "" : fmt::format(", apart: replica(s) [{}]", fmt::join(d.apart_replicas, ", ")));
  std::fprintf(stderr, "holmes-train: rank %d: elastic: lost %s; generation %d: replicas [%s] go on from step %lld; "
               "recovered in %.1f s\n", rt_.rank, what_lost.c_str(), generation_,
               fmt::format("{}", fmt::join(d.replicas, ", ")).c_str(), static_cast<long long>(d.step + 2),
               seconds_since(t0));
  std::fflush(stderr);
  return r;
}

}  // namespace holmes::runtime
