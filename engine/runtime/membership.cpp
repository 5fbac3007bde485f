// The membership decision of an elastic job (membership.hpp).
#include "engine/runtime/membership.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <tuple>
#include <stdexcept>

namespace holmes::runtime {

MembershipDecision decide_membership(const std::vector<Member>& members, const std::vector<Registration>& registrations,
                                     int min_replicas) {
  MembershipDecision d;
  std::map<int, int64_t> step_of;  // registered member -> its step
  std::map<int, int> replica_of;
  for (const Member& m : members) replica_of[m.rank] = m.replica;
  for (const Registration& r : registrations)
    if (replica_of.count(r.rank)) step_of[r.rank] = r.step;
  std::map<int, std::vector<int>> ranks_of;  // replica -> its members
  for (const Member& m : members) ranks_of[m.replica].push_back(m.rank);
  // Whole replicas by the step their ranks stand at (a replica whose ranks disagree is not whole).
  std::map<int64_t, std::vector<int>> whole_at;
  for (auto& [replica, ranks] : ranks_of) {
    std::sort(ranks.begin(), ranks.end());
    std::set<int64_t> steps;
    for (int r : ranks) {
      if (!step_of.count(r)) d.missing_ranks.push_back(r);
      else steps.insert(step_of[r]);
    }
    if (steps.size() == 1 && std::all_of(ranks.begin(), ranks.end(), [&](int r) { return step_of.count(r) > 0; }))
      whole_at[*steps.begin()].push_back(replica);
    else d.lost_replicas.push_back(replica);
  }
  // The step most whole replicas stand at goes on (ties: the one with the lowest replica, then the later);
  // a whole replica at another step (one that was frozen and woke in time to register) is
  // apart: it cannot join the others' collective where they stand.
  int64_t best = -1;
  for (const auto& [step, replicas] : whole_at) {
    auto rank_of = [&](int64_t st) {
      const std::vector<int>& v = whole_at[st];
      return std::make_tuple(v.size(), -v.front(), st);  // v ascending: front() is its lowest replica
    };
    if (best < 0 || rank_of(step) > rank_of(best)) best = step;
  }
  for (const auto& [step, replicas] : whole_at) {
    if (step == best) {
      d.replicas = replicas;
      continue;
    }
    d.apart_replicas.insert(d.apart_replicas.end(), replicas.begin(), replicas.end());
    d.lost_replicas.insert(d.lost_replicas.end(), replicas.begin(), replicas.end());
  }
  for (int replica : d.replicas) d.ranks.insert(d.ranks.end(), ranks_of[replica].begin(), ranks_of[replica].end());
  for (int replica : d.lost_replicas)
    for (int r : ranks_of[replica])
      if (step_of.count(r)) d.dropped_ranks.push_back(r);
  for (auto* v : {&d.ranks, &d.missing_ranks, &d.dropped_ranks, &d.lost_replicas, &d.apart_replicas, &d.replicas})
    std::sort(v->begin(), v->end());
  d.step = best < 0 ? 0 : best;
  const int whole = static_cast<int>(d.replicas.size());
  if (whole < min_replicas)
    d.reason = fmt::format("only {} whole replica(s) [{}] remain, parallel.min_replicas is {}", whole,
                           fmt::join(d.replicas, ", "), min_replicas);
  else if (d.replicas.empty())
    d.reason = "no whole replica remains";
  d.go_on = d.reason.empty();
  return d;
}

namespace {

std::string ints(const std::vector<int>& v) { return fmt::format("{}", fmt::join(v, " ")); }

std::vector<int> read_ints(std::istringstream& line) {
  std::vector<int> out;
  int x = 0;
  while (line >> x) out.push_back(x);
  return out;
}

}  // namespace

std::string encode_decision(const MembershipDecision& d) {
  return fmt::format("go_on {}\nstep {}\ngeneration {}\nreplicas {}\nranks {}\nlost {}\napart {}\nmissing {}\n"
                     "dropped {}\nreason {}\n", d.go_on ? 1 : 0, d.step, d.generation, ints(d.replicas), ints(d.ranks),
                     ints(d.lost_replicas), ints(d.apart_replicas), ints(d.missing_ranks), ints(d.dropped_ranks),
                     d.reason);
}

MembershipDecision decode_decision(const std::string& text) {
  MembershipDecision d;
  std::istringstream in(text);
  std::string line;
  std::set<std::string> seen;
  while (std::getline(in, line)) {
    const size_t space = line.find(' ');
    const std::string key = line.substr(0, space);
    const std::string rest = space == std::string::npos ? "" : line.substr(space + 1);
    std::istringstream values(rest);
    seen.insert(key);
    if (key == "go_on") d.go_on = rest == "1";
    else if (key == "step") values >> d.step;
    else if (key == "generation") values >> d.generation;
    else if (key == "replicas") d.replicas = read_ints(values);
    else if (key == "ranks") d.ranks = read_ints(values);
    else if (key == "lost") d.lost_replicas = read_ints(values);
    else if (key == "apart") d.apart_replicas = read_ints(values);
    else if (key == "missing") d.missing_ranks = read_ints(values);
    else if (key == "dropped") d.dropped_ranks = read_ints(values);
    else if (key == "reason") d.reason = rest;
    else throw std::runtime_error(fmt::format("elastic: membership decision with an unknown line '{}'", line));
  }
  for (const char* k : {"go_on", "step", "replicas", "ranks", "reason"})
    if (!seen.count(k)) throw std::runtime_error(fmt::format("elastic: membership decision without '{}'", k));
  return d;
}

std::string describe_replicas(const std::vector<Member>& members, const std::vector<int>& replicas) {
  std::vector<std::string> parts;
  for (int replica : replicas) {
    std::vector<int> ranks;
    for (const Member& m : members)
      if (m.replica == replica) ranks.push_back(m.rank);
    std::sort(ranks.begin(), ranks.end());
    parts.push_back(fmt::format("replica {} (rank{} {})", replica, ranks.size() == 1 ? "" : "s", fmt::join(ranks, ", ")));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace holmes::runtime
