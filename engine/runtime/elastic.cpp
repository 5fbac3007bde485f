// The elastic session (elastic.hpp): announcements, registrations, the leader's decision and
// the groups of the next generation, all through the rendezvous store.
#include "engine/runtime/elastic.hpp"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <thread>

#include "comm/errors.hpp"
#include "comm/gloo_group.hpp"
#include "comm/inproc_group.hpp"
#include "engine/plan/nccl.hpp"

namespace holmes::runtime {

namespace {

using Clock = std::chrono::steady_clock;
using schedule::Axis;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

comm::Millis millis(double s) { return comm::Millis(static_cast<int64_t>(s * 1000)); }

// "07:41:09.532 UTC": when this rank met the failure, for a reader lining it up with a kill.
std::string wall_clock_now() {
  const auto now = std::chrono::system_clock::now();
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  return fmt::format("{:%H:%M:%S}.{:03d} UTC", fmt::gmtime(std::chrono::system_clock::to_time_t(now)), ms);
}

bool contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// The plan group of `kind` this rank is in (the world group, its outer group).
const plan::Group* plan_group_of(const plan::Plan& plan, schedule::GroupKind kind, int rank) {
  for (const plan::Group& g : plan.groups)
    if (g.kind == kind && contains(g.ranks, rank)) return &g;
  return nullptr;
}

}  // namespace

namespace {

constexpr const char* kStartedKey = "elastic/started";        // counts the ranks that finished start-up
constexpr const char* kGenerationKey = "elastic/generation";  // the generations decided after a loss

}  // namespace

void refuse_late_rank(comm::Store& store, int rank) {
  if (store.add(kStartedKey, 0) == 0) return;
  const int64_t generation = store.add(kGenerationKey, 0);
  throw ElasticStop(fmt::format("elastic: rank {} started after its job began (the job is at generation {}{}); "
                                "rejoining a running elastic job is not built yet (docs/elastic.md), so this rank "
                                "stops", rank, generation, generation > 0 ? ", without this rank's replica" : ""));
}

ElasticSession::ElasticSession(Runtime& rt, const spec::JobSpec& spec)
    : rt_(rt), timeout_s_(spec.cluster.timeout_s), settle_s_(std::min(5.0, spec.cluster.timeout_s)),
      min_replicas_(spec.parallel.min_replicas) {
  for (const plan::RankInfo& r : rt.plan.ranks) members_.push_back({r.rank, r.at[Axis::kReplica]});
  replica_ = rt.plan.ranks.at(rt.rank).at[Axis::kReplica];
  rt.store->add(kStartedKey, 1);
}

ElasticSession::~ElasticSession() = default;

std::string ElasticSession::key(const std::string& name) const {
  return fmt::format("elastic/g{}/{}", generation_, name);
}

comm::ProcessGroup& ElasticSession::world() { return world_ ? *world_ : rt_.world_group(); }

bool ElasticSession::announced() { return rt_.store->add(key("broken"), 0) > 0; }

bool ElasticSession::exchange_complete(int64_t step) {
  comm::Store& store = *rt_.store;
  const std::string x = key(fmt::format("x{}", step));
  int64_t in = store.add(x, 1);
  const int n = static_cast<int>(members_.size());
  const int first = std::min_element(members_.begin(), members_.end(),
                                     [](const Member& a, const Member& b) { return a.rank < b.rank; })->rank;
  if (rt_.rank == first) {
    // The one writer of the verdict: every member counted in, or a failure came first.
    const auto deadline = Clock::now() + millis(timeout_s_);
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
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      in = store.add(x, 0);
    }
    comm::set_string(store, x + "/verdict", whole ? "1" : "0");
    verdict_step_ = step;
    return whole;
  }
  try {
    return comm::get_string(store, x + "/verdict", millis(timeout_s_ + settle_s_ + 5)) == "1";
  } catch (const comm::StoreError&) {
    return false;  // the first rank is gone: the recovery finds replica 0 lost
  }
}

void ElasticSession::close_groups() {
  // Generation 0's groups are the start-up's; later ones are ours. Closing them (not only
  // aborting) ends the peers' waits on this rank at once.
  auto across = [](schedule::GroupKind k) { return k == plan::kWorldGroup || k.axes.contains(Axis::kReplica); };
  for (auto it = rt_.comms.begin(); it != rt_.comms.end();) {
    if (!across(it->kind)) {
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
  std::vector<std::string> keys;
  for (const Member& m : members_) keys.push_back(key(fmt::format("alive/{}", m.rank)));
  const auto start = Clock::now();
  size_t registered = 0;
  auto changed_at = start;
  for (;;) {
    const size_t now_in = keys.size() - store.missing(keys).size();
    if (now_in != registered) registered = now_in, changed_at = Clock::now();
    if (registered == keys.size() || seconds_since(changed_at) >= settle_s_ ||
        seconds_since(start) >= timeout_s_ + settle_s_)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::vector<Registration> regs;
  const std::vector<std::string> missing = store.missing(keys);
  for (size_t i = 0; i < keys.size(); ++i)
    if (std::find(missing.begin(), missing.end(), keys[i]) == missing.end())
      regs.push_back({members_[i].rank, std::stoll(comm::get_string(store, keys[i], millis(timeout_s_)))});
  return decide_membership(members_, regs, min_replicas_);
}

void ElasticSession::make_groups(const MembershipDecision& d) {
  ++generation_;
  std::vector<Member> kept;
  for (const Member& m : members_)
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
    if (gs.global_ranks.size() > 1) return comm::make_gloo_group(rt_.store, gs, group_net(*g, single_machine));
    return comm::make_inproc_group(std::make_shared<comm::InProcessHub>(), gs);
  };
  world_ = make(plan::kWorldGroup);
  outer_ = make(plan::kOuterGroup);
  if (outer_ && outer_->size() == 1) outer_.reset();
}

parallel::ReplicaRegroup ElasticSession::recover(int64_t step, bool exchange, const std::string& what) {
  const auto t0 = Clock::now();
  const std::string when = wall_clock_now();
  comm::Store& store = *rt_.store;
  std::fflush(stdout);
  std::fprintf(stderr, "holmes-train: rank %d: elastic: %s (step %lld, %s); the replicas decide who goes on\n",
               rt_.rank, what.c_str(), static_cast<long long>(step + 1), when.c_str());
  std::fflush(stderr);
  MembershipDecision d;
  try {
    store.add(key("broken"), 1);
    const int first = std::min_element(members_.begin(), members_.end(),
                                       [](const Member& a, const Member& b) { return a.rank < b.rank; })->rank;
    // The first rank met the failure inside an exchange it has not judged yet: its verdict is 0.
    if (exchange && rt_.rank == first && verdict_step_ != step) {
      comm::set_string(store, key(fmt::format("x{}/verdict", step)), "0");
      verdict_step_ = step;
    }
    close_groups();
    comm::set_string(store, key(fmt::format("alive/{}", rt_.rank)), std::to_string(step));
    if (store.add(key("leader"), 1) == 1) {
      d = lead();
      if (d.go_on) store.add(kGenerationKey, 1);
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
  if (!contains(d.ranks, rt_.rank)) {
    std::vector<int> mine;
    for (const Member& m : before)
      if (m.replica == replica_ && contains(d.missing_ranks, m.rank)) mine.push_back(m.rank);
    throw ElasticStop(fmt::format("elastic: replica {} lost rank(s) [{}] (not registered within the settle window); "
                                  "the other replicas go on without it, so this rank stops",
                                  replica_, fmt::join(mine, ", ")));
  }
  make_groups(d);
  parallel::ReplicaRegroup r;
  r.place = rt_.rank_plan.place;
  r.place.at[Axis::kReplica] = static_cast<int>(std::find(d.replicas.begin(), d.replicas.end(), replica_) - d.replicas.begin());
  r.place.size[Axis::kReplica] = static_cast<int>(d.replicas.size());
  r.outer = outer_.get();
  r.replicas = d.replicas;
  std::fprintf(stderr,
               "holmes-train: rank %d: elastic: lost %s (missing rank(s) [%s]); generation %d: replicas [%s] go on "
               "from step %lld; recovered in %.1f s\n",
               rt_.rank, lost.c_str(), fmt::format("{}", fmt::join(d.missing_ranks, ", ")).c_str(), generation_,
               fmt::format("{}", fmt::join(d.replicas, ", ")).c_str(), static_cast<long long>(d.step + 2),
               seconds_since(t0));
  std::fflush(stderr);
  return r;
}

}  // namespace holmes::runtime
