#include "engine/train/stragglers.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

namespace holmes::train {

namespace {

using schedule::Axis;

bool has_figure(double ms) { return std::isfinite(ms) && ms > 0; }

// The median of `v` (the mean of the two middle values of an even count); v not empty.
double median_of(std::vector<double> v) {
  const size_t n = v.size(), mid = n / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<long>(mid), v.end());
  if (n % 2 == 1) return v[mid];
  const double upper = v[mid];
  const double lower = *std::max_element(v.begin(), v.begin() + static_cast<long>(mid));
  return (lower + upper) / 2;
}

}  // namespace

std::vector<RankWork> rank_work_of(const plan::Plan& plan) {
  std::vector<RankWork> out(plan.ranks.size());
  std::map<std::array<int, schedule::kAxes>, int> classes;
  const int replicas = std::max(1, plan.replicas.count);
  for (const plan::RankInfo& r : plan.ranks) {
    schedule::Coords key = r.at;
    key[Axis::kDp] = 0, key[Axis::kReplica] = 0;
    RankWork& w = out.at(static_cast<size_t>(r.rank));
    w.peer_class = classes.emplace(key.v, static_cast<int>(classes.size())).first->second;
    w.replica = replicas > 1 ? r.at[Axis::kReplica] : 0;
    const std::string node = static_cast<size_t>(r.node) < plan.hostnames.size() ? plan.hostnames[r.node]
                                                                                  : fmt::format("{}", r.node);
    w.where = fmt::format("node {}, stage {}", node, r.at[Axis::kPp]);
    if (plan.tp > 1) w.where += fmt::format(", tensor slice {}", r.at[Axis::kTp]);
    if (replicas > 1) w.where += fmt::format(", replica {}", w.replica);
  }
  return out;
}

StragglerDetector::StragglerDetector(std::vector<RankWork> ranks, StragglerRule rule, int64_t start)
    : ranks_(std::move(ranks)), rule_(rule), covered_(start) {
  if (!(rule_.threshold > 0) || rule_.lines < 1)
    throw std::invalid_argument(fmt::format("StragglerDetector: threshold {} and lines {} (expected > 0 and >= 1)",
                                            rule_.threshold, rule_.lines));
  for (const RankWork& w : ranks_) replicas_ = std::max(replicas_, w.replica + 1);
  rank_tracks_.resize(ranks_.size());
  replica_tracks_.resize(static_cast<size_t>(replicas_));
}

bool StragglerDetector::compares() const {
  if (replicas_ > 1) return true;
  std::map<int, int> members;
  for (const RankWork& w : ranks_)
    if (++members[w.peer_class] > 1) return true;
  return false;
}

void StragglerDetector::update(Track& t, StragglerKind kind, int id, double ratio, int peers, int64_t first,
                               int64_t through, std::vector<StragglerEvent>& events) {
  const bool slower = ratio > 1 + rule_.threshold;
  if (t.named >= 0) {
    Straggler& s = history_[static_cast<size_t>(t.named)];
    s.ratio = ratio, s.peers = peers;
    if (slower) {
      s.worst = std::max(s.worst, ratio);
      t.under = 0;
    } else if (++t.under >= rule_.lines) {
      s.until = through;
      events.push_back({s, /*recovered=*/true});
      t = Track{};
    }
    return;
  }
  if (!slower) {
    t.over = 0;
    return;
  }
  if (t.over++ == 0) t.first_over = first;
  if (t.over < rule_.lines) return;
  t.named = static_cast<int>(history_.size());
  t.under = 0;
  history_.push_back(Straggler{kind, id, ratio, ratio, t.first_over, -1, peers});
  events.push_back({history_.back(), /*recovered=*/false});
}

std::vector<StragglerEvent> StragglerDetector::observe(int64_t through, const std::vector<double>& compute_ms) {
  if (compute_ms.size() != ranks_.size())
    throw std::invalid_argument(fmt::format("StragglerDetector::observe: {} figures for {} ranks", compute_ms.size(),
                                            ranks_.size()));
  const int64_t first = covered_ + 1;
  covered_ = through;
  std::vector<StragglerEvent> events;
  // Each rank against the median of the other ranks of its class that have a figure.
  std::map<int, std::vector<int>> members;
  for (size_t r = 0; r < ranks_.size(); ++r)
    if (has_figure(compute_ms[r])) members[ranks_[r].peer_class].push_back(static_cast<int>(r));
  for (const auto& [cls, ranks] : members) {
    if (ranks.size() < 2) continue;
    for (int r : ranks) {
      std::vector<double> peers;
      for (int p : ranks)
        if (p != r) peers.push_back(compute_ms[static_cast<size_t>(p)]);
      const double ratio = compute_ms[static_cast<size_t>(r)] / median_of(peers);
      update(rank_tracks_[static_cast<size_t>(r)], StragglerKind::kRank, r, ratio, static_cast<int>(peers.size()),
             first, through, events);
    }
  }
  // Each replica's mean over its ranks, when every one of them has a figure (the replicas run
  // the same plan, so their means are of the same work), against the other replicas' median.
  if (replicas_ > 1) {
    std::vector<double> sum(static_cast<size_t>(replicas_), 0.0);
    std::vector<int> count(static_cast<size_t>(replicas_), 0), missing(static_cast<size_t>(replicas_), 0);
    for (size_t r = 0; r < ranks_.size(); ++r) {
      const auto k = static_cast<size_t>(ranks_[r].replica);
      if (has_figure(compute_ms[r]))
        sum[k] += compute_ms[r], ++count[k];
      else
        ++missing[k];
    }
    std::vector<int> whole;
    for (int k = 0; k < replicas_; ++k)
      if (count[static_cast<size_t>(k)] > 0 && missing[static_cast<size_t>(k)] == 0) whole.push_back(k);
    if (whole.size() >= 2)
      for (int k : whole) {
        std::vector<double> others;
        for (int o : whole)
          if (o != k) others.push_back(sum[static_cast<size_t>(o)] / count[static_cast<size_t>(o)]);
        const double mean = sum[static_cast<size_t>(k)] / count[static_cast<size_t>(k)];
        update(replica_tracks_[static_cast<size_t>(k)], StragglerKind::kReplica, k, mean / median_of(others),
               static_cast<int>(others.size()), first, through, events);
      }
  }
  return events;
}

std::vector<Straggler> StragglerDetector::current() const {
  std::vector<Straggler> out;
  for (const Track& t : rank_tracks_)
    if (t.named >= 0) out.push_back(history_[static_cast<size_t>(t.named)]);
  for (const Track& t : replica_tracks_)
    if (t.named >= 0) out.push_back(history_[static_cast<size_t>(t.named)]);
  return out;
}

namespace {

std::string who(const StragglerDetector& d, const Straggler& s) {
  if (s.kind == StragglerKind::kRank) return fmt::format("rank {} ({})", s.id, d.rank(s.id).where);
  std::vector<int> ranks;
  for (int r = 0; r < d.ranks(); ++r)
    if (d.rank(r).replica == s.id) ranks.push_back(r);
  if (ranks.size() > 8) return fmt::format("replica {} ({} ranks)", s.id, ranks.size());
  return fmt::format("replica {} (rank{} {})", s.id, ranks.size() == 1 ? "" : "s", fmt::join(ranks, ", "));
}

std::string peers_of(const Straggler& s) {
  if (s.kind == StragglerKind::kRank)
    return s.peers == 1 ? "its 1 peer's compute" : fmt::format("its {} peers' compute", s.peers);
  return s.peers == 1 ? "the other replica's mean compute" : fmt::format("the other {} replicas' mean compute", s.peers);
}

}  // namespace

std::string describe_straggler(const StragglerDetector& d, const Straggler& s) {
  return fmt::format("{} {:.2f}x {} since step {}", who(d, s), s.ratio, peers_of(s), s.since);
}

std::string describe_recovery(const StragglerDetector& d, const Straggler& s) {
  return fmt::format("{} back within {:.0f}% of {} at step {} (a straggler from step {}, at worst {:.2f}x)", who(d, s),
                     100 * d.rule().threshold, peers_of(s), s.until, s.since, s.worst);
}

std::string describe_spell(const StragglerDetector& d, const Straggler& s) {
  return fmt::format("{} from step {} to {}, at worst {:.2f}x {}", who(d, s), s.since,
                     s.until < 0 ? std::string("the end") : fmt::format("step {}", s.until), s.worst, peers_of(s));
}

}  // namespace holmes::train
