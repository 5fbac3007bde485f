// The run report's straggler section (report.hpp): each rank's mean compute per step on the
// log rows that carry the job's figures, and a table of every rank and replica the run named
// a straggler (engine/train/stragglers.hpp), from the rows' stragglers lists.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "common/html.hpp"
#include "engine/tools/report.hpp"

namespace holmes::tools {

namespace {

using html::escape;

// One straggler's spell as the rows show it: named on rows from `first` to `last` (their
// figures_step), with `since` as the log gave it.
struct Spell {
  bool replica = false;
  int id = 0;
  double since = NAN, first = NAN, last = NAN, ended = NAN;  // ended: the row that no longer named it
  double ratio = NAN, worst = NAN;
  int peers = 0;
};

std::vector<Spell> spells_of(const RunFiles& f) {
  std::vector<Spell> out;
  std::map<std::pair<bool, int>, size_t> open;  // (replica, id) -> its spell in `out`
  for (const MetricRow& r : f.rows) {
    if (!r.has_stragglers) continue;
    std::map<std::pair<bool, int>, size_t> still;
    for (const bool replica : {false, true})
      for (const MetricRow::Straggler& s : replica ? r.straggler_replicas : r.stragglers) {
        const std::pair<bool, int> key{replica, s.id};
        auto it = open.find(key);
        if (it == open.end() || out[it->second].since != s.since) {
          out.push_back({replica, s.id, s.since, r.figures_step, r.figures_step, NAN, s.ratio, s.ratio, s.peers});
          it = open.insert_or_assign(key, out.size() - 1).first;
        }
        Spell& spell = out[it->second];
        spell.last = r.figures_step, spell.ratio = s.ratio, spell.peers = s.peers;
        if (std::isfinite(s.ratio)) spell.worst = std::isfinite(spell.worst) ? std::max(spell.worst, s.ratio) : s.ratio;
        still.emplace(key, it->second);
      }
    for (const auto& [key, index] : open)
      if (!still.count(key)) out[index].ended = r.figures_step;
    open = std::move(still);
  }
  return out;
}

// "rank 3: node n2, stage 1, replica 0" from the plan when there is one.
std::string who(const RunFiles& f, const Spell& s) {
  if (s.replica) return fmt::format("replica {}", s.id);
  std::string out = fmt::format("rank {}", s.id);
  if (!f.plan || static_cast<size_t>(s.id) >= f.plan->ranks.size()) return out;
  const plan::RankInfo& r = f.plan->ranks[static_cast<size_t>(s.id)];
  const std::string node = static_cast<size_t>(r.node) < f.plan->hostnames.size() ? f.plan->hostnames[r.node]
                                                                                     : fmt::format("{}", r.node);
  out += fmt::format(": node {}, stage {}", node, r.at[schedule::Axis::kPp]);
  const bool replicas = std::any_of(f.plan->ranks.begin(), f.plan->ranks.end(),
                                    [](const plan::RankInfo& x) { return x.at[schedule::Axis::kReplica] > 0; });
  if (replicas) out += fmt::format(", replica {}", r.at[schedule::Axis::kReplica]);
  return out;
}

std::string step_text(double step) { return std::isfinite(step) ? fmt::format("{:.0f}", step) : "-"; }
std::string ratio_text(double ratio) { return std::isfinite(ratio) ? fmt::format("{:.2f}x", ratio) : "-"; }

std::string compute_chart(const RunFiles& f, size_t ranks, const std::vector<Spell>& spells) {
  html::LineChart chart{"compute-ranks", "Compute per step, each rank (the straggler check's figures)", "step",
                        "compute (ms per step)", {}};
  chart.y_from_zero = true;
  for (size_t k = 0; k < ranks; ++k) {
    const bool named = std::any_of(spells.begin(), spells.end(),
                                   [&](const Spell& s) { return !s.replica && s.id == static_cast<int>(k); });
    html::Series s{fmt::format("rank {}{}", k, named ? " (straggler)" : ""), rank_colour(f, k, ranks), {}, {}, named};
    for (const MetricRow& r : f.rows)
      if (k < r.compute_ms_ranks.size()) s.x.push_back(r.figures_step), s.y.push_back(r.compute_ms_ranks[k]);
    chart.series.push_back(std::move(s));
  }
  return "<div class=\"charts\">" + html::line_chart(chart) + "</div>\n";
}

}  // namespace

std::string straggler_section(const RunFiles& f) {
  size_t ranks = 0;
  bool checked = false;
  for (const MetricRow& r : f.rows) ranks = std::max(ranks, r.compute_ms_ranks.size()), checked |= r.has_stragglers;
  if (ranks == 0 && !checked)
    return "<p class=\"missing\">No per-rank compute figures: a single process, a job of more than 256 ranks, or a "
           "run from before the straggler check.</p>\n";
  const std::vector<Spell> spells = spells_of(f);
  std::string out = "<p>Each rank is compared on every log line with the job's figures with the ranks doing the same "
                    "work (same stage and tensor slice), each replica with the other replicas; one persistently "
                    "slower than their median (log.straggler_threshold for log.straggler_lines lines) is named.</p>\n";
  if (ranks > 0) out += compute_chart(f, ranks, spells);
  if (spells.empty()) return out + "<p class=\"stragglers-none\">No rank or replica was named a straggler.</p>\n";
  out += "<table class=\"stragglers\"><tr><th>straggler</th><th>since step</th><th>named on rows to step</th>"
         "<th>until</th><th>ratio (last)</th><th>worst</th><th>compared with</th></tr>";
  for (const Spell& s : spells)
    out += fmt::format(
        "<tr class=\"straggler\" data-kind=\"{}\" data-id=\"{}\"><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}"
        "</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
        s.replica ? "replica" : "rank", s.id, escape(who(f, s)), step_text(s.since), step_text(s.last),
        std::isfinite(s.ended) ? fmt::format("back under by step {:.0f}", s.ended) : std::string("the last row"),
        ratio_text(s.ratio), ratio_text(s.worst),
        fmt::format("{} {}{}", s.peers, s.replica ? "replica" : "rank", s.peers == 1 ? "" : "s"));
  return out + "</table>\n";
}

}  // namespace holmes::tools
