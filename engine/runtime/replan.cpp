// Re-planning a single pipeline on its survivors (replan.hpp): registrations, the leader's
// decision, the survivors' plan and start-up opened again, all through the rendezvous store.
#include "engine/runtime/replan.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "comm/errors.hpp"
#include "comm/inproc_group.hpp"
#include "common/errors.hpp"
#include "engine/plan/nccl.hpp"
#include "engine/runtime/elastic.hpp"
#include "engine/runtime/settle.hpp"

namespace holmes::runtime {

namespace {

comm::Millis millis(double s) { return comm::Millis(static_cast<int64_t>(s * 1000)); }
comm::Bytes to_bytes(const std::string& s) { return comm::Bytes(s.begin(), s.end()); }

std::string join(const std::vector<int>& v) { return fmt::format("{}", fmt::join(v, ",")); }

std::vector<int> split_ints(const std::string& text) {
  std::vector<int> out;
  std::istringstream in(text);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) out.push_back(std::stoi(item));
  return out;
}

}  // namespace

bool replans_on_loss(const spec::JobSpec& spec, int world) {
  return spec.parallel.elastic && spec.parallel.replicas == 1 && world > 1;
}

std::vector<int> lost_nodes(const plan::Plan& plan, const std::vector<int>& alive) {
  const std::set<int> in(alive.begin(), alive.end());
  std::set<int> lost;
  for (const plan::RankInfo& r : plan.ranks)
    if (!in.count(r.rank)) lost.insert(r.node);
  return {lost.begin(), lost.end()};
}

std::vector<int> survivor_ranks(const plan::Plan& before, const plan::SurvivorPlan& after) {
  std::vector<int> new_node(before.hostnames.size(), -1);
  for (size_t n = 0; n < after.old_node.size(); ++n) new_node.at(after.old_node[n]) = static_cast<int>(n);
  std::vector<int> out(before.ranks.size(), -1);
  for (const plan::RankInfo& r : before.ranks) {
    const int node = new_node.at(r.node);
    if (node < 0) continue;
    const auto it = std::find_if(after.plan.ranks.begin(), after.plan.ranks.end(), [&](const plan::RankInfo& a) {
      return a.node == node && a.local_rank == r.local_rank;
    });
    if (it == after.plan.ranks.end())
      throw std::logic_error(fmt::format("survivor_ranks: the survivors' plan has no rank on node {} (was {}) local "
                                         "rank {}", node, r.node, r.local_rank));
    out[r.rank] = it->rank;
  }
  return out;
}

std::string encode_replan(const ReplanDecision& d) {
  return fmt::format("generation {}\nlost {}\nmissing {}\nsteps {}\n", d.generation, join(d.lost_nodes),
                     join(d.missing_ranks), d.steps_done);
}

ReplanDecision decode_replan(const std::string& text) {
  ReplanDecision d;
  std::istringstream in(text);
  std::string line;
  int seen = 0;
  try {
    while (std::getline(in, line)) {
      const auto space = line.find(' ');
      const std::string name = line.substr(0, space), value = space == std::string::npos ? "" : line.substr(space + 1);
      if (name == "generation") d.generation = std::stoi(value), seen |= 1;
      else if (name == "lost") d.lost_nodes = split_ints(value), seen |= 2;
      else if (name == "missing") d.missing_ranks = split_ints(value), seen |= 4;
      else if (name == "steps") d.steps_done = std::stoll(value), seen |= 8;
      else throw std::invalid_argument(name);
    }
  } catch (const std::logic_error&) {
    seen = -1;
  }
  if (seen != 15) throw std::runtime_error(fmt::format("re-plan: malformed decision in the store: '{}'", text));
  return d;
}

void check_replan_nodes(const spec::JobSpec& spec, int nodes, int world) {
  if (!replans_on_loss(spec, world) || nodes >= 2) return;
  throw UserError(fmt::format("parallel.elastic = true with parallel.replicas = 1 re-plans the pipeline on the nodes "
                              "that remain after losing one, but this job of {} ranks runs on one node (losing any "
                              "of its ranks loses the node, and nothing remains); accepted: a job across 2 or more "
                              "nodes, or parallel.elastic = false", world));
}

ReplanSession::ReplanSession(Runtime& rt, const spec::JobSpec& spec)
    : rt_(rt), spec_(spec), base_(rt.store), timeout_s_(spec.cluster.timeout_s),
      settle_s_(std::min(5.0, spec.cluster.timeout_s)), start_rank_(rt.rank) {
  // Every rank sees the same topology: all refuse alike, before any step.
  check_replan_nodes(spec, static_cast<int>(rt.topology.nodes.size()), rt.world);
}

std::string ReplanSession::key(const std::string& name) const {
  return fmt::format("replan/g{}/{}", generation_, name);
}

void ReplanSession::close_groups() {
  // Closing (not only aborting) ends the peers' waits on this rank at once.
  for (RankComm& c : rt_.comms) c.group->abort();
  rt_.comms.clear();
}

ReplanDecision ReplanSession::lead() {
  comm::Store& store = *base_;
  std::vector<std::string> keys;
  for (int r = 0; r < rt_.world; ++r) keys.push_back(key(fmt::format("alive/{}", r)));
  const std::vector<std::string> missing = wait_for_registrations(store, keys, settle_s_, timeout_s_ + settle_s_);
  ReplanDecision d;
  d.generation = generation_ + 1;
  std::vector<int> alive;
  for (int r = 0; r < rt_.world; ++r) {
    if (std::find(missing.begin(), missing.end(), keys[r]) != missing.end()) {
      d.missing_ranks.push_back(r);
      continue;
    }
    alive.push_back(r);
    d.steps_done = std::max<int64_t>(d.steps_done, std::stoll(comm::get_string(store, keys[r], millis(timeout_s_))));
  }
  d.lost_nodes = lost_nodes(rt_.plan, alive);
  return d;
}

ReplanSession::Outcome ReplanSession::recover(const std::string& what, int64_t steps_done) {
  std::fflush(stdout);
  std::fprintf(stderr, "holmes-train: rank %d: re-plan: %s (after step %lld, generation %d); the survivors decide\n",
               rt_.rank, what.c_str(), static_cast<long long>(steps_done), generation_);
  std::fflush(stderr);
  close_groups();
  Outcome o;
  try {
    comm::Store& store = *base_;
    comm::set_string(store, key(fmt::format("alive/{}", rt_.rank)), std::to_string(steps_done));
    if (store.add(key("leader"), 1) == 1) {
      o.decision = lead();
      comm::set_string(store, key("decision"), encode_replan(o.decision));
    } else {
      o.decision = decode_replan(comm::get_string(store, key("decision"), millis(timeout_s_ + 2 * settle_s_ + 10)));
    }
    store.add(key("read"), 1);
  } catch (const comm::StoreError& e) {
    throw ElasticStop(fmt::format("re-plan: the rendezvous store, the arbiter of who goes on, failed: {} (a store "
                                  "hosted by rank 0 dies with its node; docs/elastic.md)", e.what()));
  }
  const ReplanDecision& d = o.decision;
  const int my_node = rt_.plan.ranks.at(rt_.rank).node;
  if (std::find(d.lost_nodes.begin(), d.lost_nodes.end(), my_node) != d.lost_nodes.end()) {
    hold_store_until_read(d);
    throw ElasticStop(fmt::format("re-plan: node {} ({}) lost rank(s) [{}] of generation {}; the other nodes go on "
                                  "without it, so this rank stops", my_node, rt_.plan.hostnames.at(my_node),
                                  fmt::join(d.missing_ranks, ", "), generation_));
  }
  if (d.lost_nodes.empty()) {
    // Every rank registered (a peer held up only for a while): the same nodes, the same plan,
    // from the last checkpoint.
    o.survivors.fits = true;
    o.survivors.spec = spec_;
    o.survivors.topology = rt_.topology;
    for (int n = 0; n < static_cast<int>(rt_.topology.nodes.size()); ++n) o.survivors.old_node.push_back(n);
    o.survivors.plan = rt_.plan;
  } else {
    o.survivors = plan::plan_on_survivors(spec_, rt_.topology, d.lost_nodes);
  }
  std::vector<std::string> hosts;
  for (int n : d.lost_nodes) hosts.push_back(rt_.plan.hostnames.at(n));
  const std::string lost = d.lost_nodes.empty()
                               ? std::string("no node (every rank registered)")
                               : fmt::format("node(s) [{}] ({}; missing rank(s) [{}])", fmt::join(d.lost_nodes, ", "),
                                             fmt::join(hosts, ", "), fmt::join(d.missing_ranks, ", "));
  if (!o.survivors.fits) {
    hold_store_until_read(d);
    throw ElasticStop(fmt::format("re-plan: lost {}; the survivors cannot hold the model: {}. The job stops; its "
                                  "checkpoints are untouched (resume with --resume auto on enough nodes)",
                                  lost, o.survivors.why));
  }
  o.new_rank = survivor_ranks(rt_.plan, o.survivors).at(rt_.rank);
  if (rt_.rank == 0 || o.new_rank == 0)
    std::fprintf(stderr, "holmes-train: rank %d: re-plan: lost %s; generation %d: %d rank(s) on %zu node(s), "
                 "tp %d x pp %d x dp %d; this rank becomes rank %d\n", rt_.rank, lost.c_str(), d.generation,
                 o.survivors.plan.world, o.survivors.topology.nodes.size(), o.survivors.plan.tp, o.survivors.plan.pp,
                 o.survivors.plan.dp, o.new_rank);
  std::fflush(stderr);
  return o;
}

void ReplanSession::hold_store_until_read(const ReplanDecision& d) const {
  // The process that started as rank 0 hosts a tcp:// store (a store the launcher hosts or a
  // file:// one outlives it: the wait is then only short). Before it stops it waits until every
  // rank that registered has read the decision, at most cluster.timeout_s: else a survivor still
  // waiting for it would meet a closed store instead of the reason the job stops.
  if (start_rank_ != 0) return;
  const int64_t readers = rt_.world - static_cast<int64_t>(d.missing_ranks.size());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
  try {
    while (base_->add(key("read"), 0) < readers && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  } catch (const comm::StoreError&) {
    // The store is gone already: nothing to hold.
  }
}

void ReplanSession::reopen(const Outcome& o) {
  generation_ = o.decision.generation;
  spec_ = o.survivors.spec;
  rt_.store = std::make_shared<comm::PrefixStore>(base_, key("run/"));
  rt_.rank = o.new_rank;
  rt_.world = o.survivors.plan.world;
  rt_.topology = o.survivors.topology;
  rt_.plan = o.survivors.plan;
  rt_.plan_hash = plan::plan_hash(rt_.plan);
  rt_.node = rt_.plan.ranks.at(rt_.rank).node;
  rt_.joining = false;
  // Phase 3 again: every survivor computed the plan on its own; they must agree before any
  // group exists.
  const comm::Millis timeout = timeout_of(spec_);
  comm::Store& store = *rt_.store;
  std::vector<std::string> lines;
  const std::string line = agreement_line(rt_.plan_hash, spec_digest(spec_), topology_digest(rt_.topology));
  for (const auto& b : comm::store_all_gather(store, "agree", rt_.rank, rt_.world, to_bytes(line), timeout))
    lines.emplace_back(b.begin(), b.end());
  wait_all_have_read(store, "agree", rt_.rank, rt_.world, timeout);
  check_agreement(lines);
  rt_.rank_plan = plan::rank_plan(rt_.plan, rt_.rank);
  create_rank_groups(rt_, spec_);
  if (rt_.world == 1) {
    // One survivor: start-up makes no group of one member, but the loop reduces its job-wide
    // figures over the world group.
    for (size_t i = 0; i < rt_.plan.groups.size(); ++i) {
      if (rt_.plan.groups[i].kind != plan::kWorldGroup) continue;
      comm::GroupSpec gs;
      gs.name = plan::group_name(rt_.plan.groups[i]);
      gs.global_ranks = {0};
      gs.global_rank = 0;
      gs.timeout = timeout;
      rt_.comms.push_back({static_cast<int>(i), plan::kWorldGroup,
                           comm::make_inproc_group(std::make_shared<comm::InProcessHub>(), gs)});
    }
  }
}

}  // namespace holmes::runtime
