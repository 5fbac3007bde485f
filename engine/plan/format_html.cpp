// The plan as a picture (--plan-only --format html, and the plan part of `holmes-train
// report`): islands as regions in the order the pipeline visits them, nodes inside, each rank
// coloured by its pipeline stage; the groups that leave a node drawn or summarised by link
// class and transport with the bytes each class carries per step; the stage table with a
// memory bar against the usable device memory; the estimate as a stacked bar beside the
// baselines. Large jobs are drawn one glyph per node. Every name from the topology or the
// spec is escaped. Element classes and data- attributes are what test/integration/pictures
// checks (island, node, rank, stage).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include "common/format.hpp"
#include "common/html.hpp"
#include "engine/plan/plan.hpp"

namespace holmes::plan {

namespace {

using html::coord;
using html::escape;

constexpr double kGiB = double(1 << 30);
constexpr int kWidth = 1200;      // the topology picture's viewBox width
constexpr int kDetailRanks = 512;  // up to this many ranks (and 16 per node) each rank is a box
constexpr int kDetailPerNode = 16;

const char* link_colour(LinkKind k) {
  switch (k) {
    case LinkKind::kIntraNode: return "#7f7f7f";
    case LinkKind::kIb: return "#1f77b4";
    case LinkKind::kRoce: return "#2ca02c";
    case LinkKind::kEthernet: return "#d62728";
  }
  return "#000";
}
const char* island_fill(const std::string& kind) {
  if (kind == "ib") return "#eef4fb";
  if (kind == "roce") return "#eef8ee";
  return "#fbf1ec";
}

// The facts the drawing needs, indexed once.
struct View {
  const Plan& p;
  std::vector<int> island_of_node;             // per node
  std::vector<std::vector<int>> ranks_of_node;  // per node, ascending
  std::vector<int> islands;                     // ids in drawing order: pipeline order, then the rest
  explicit View(const Plan& plan) : p(plan) {
    const size_t nodes = std::max(p.hostnames.size(), p.node_nets.size());
    island_of_node.assign(nodes, 0);
    ranks_of_node.resize(nodes);
    for (const IslandInfo& isl : p.islands)
      for (int n : isl.nodes)
        if (n >= 0 && size_t(n) < nodes) island_of_node[n] = isl.id;
    for (const RankInfo& r : p.ranks)
      if (r.node >= 0 && size_t(r.node) < nodes) ranks_of_node[r.node].push_back(r.rank);
    for (int i : p.island_order)
      if (std::find(islands.begin(), islands.end(), i) == islands.end()) islands.push_back(i);
    for (const IslandInfo& isl : p.islands)
      if (!isl.nodes.empty() && std::find(islands.begin(), islands.end(), isl.id) == islands.end())
        islands.push_back(isl.id);
  }
  const IslandInfo* island(int id) const {
    for (const IslandInfo& i : p.islands)
      if (i.id == id) return &i;
    return nullptr;
  }
  std::string host(int n) const { return size_t(n) < p.hostnames.size() ? p.hostnames[n] : fmt::format("node{}", n); }
  int stage_of(int rank) const { return size_t(rank) < p.ranks.size() ? p.ranks[rank].at[Axis::kPp] : 0; }
  int node_of(int rank) const { return size_t(rank) < p.ranks.size() ? p.ranks[rank].node : 0; }
  bool detailed() const {
    size_t per_node = 0;
    for (const auto& r : ranks_of_node) per_node = std::max(per_node, r.size());
    return p.world <= kDetailRanks && per_node <= size_t(kDetailPerNode);
  }
};

// "0..3" or "2" for a sorted set of stages.
std::string stage_range(const std::set<int>& s) {
  if (s.empty()) return "none";
  if (s.size() == 1) return fmt::format("stage {}", *s.begin());
  return fmt::format("stages {}..{}", *s.begin(), *s.rbegin());
}

// Groups summarised: kind, transport, link -> count and size.
struct GroupSummary {
  int count = 0;
  size_t size = 0;
  bool crosses_islands = false;
};
// A kind in listing order, with its name (kinds past kGroupKinds apart by name).
using KindKey = std::pair<int, std::string>;
KindKey kind_key(GroupKind kind) { return {listing_order(kind), to_string(kind)}; }
using GroupKey = std::tuple<KindKey, Transport, LinkKind>;

// Pipeline neighbours on different nodes (pairs of nodes, with how many pp links join them
// and the link class of the group).
struct NodeEdge {
  int count = 0;
  LinkKind link = LinkKind::kIntraNode;
};

std::string topology_svg(const View& v) {
  const Plan& p = v.p;
  const bool detail = v.detailed();
  const double pad = 8, band_pad = 10, header = 22, gap = 34;
  const double inner = kWidth - 2 * pad - 2 * band_pad;
  // One node's box: ranks as cells (detail) or one glyph.
  size_t per_node = 1;
  for (const auto& r : v.ranks_of_node) per_node = std::max(per_node, r.size());
  const double cell = 14;
  const int cols = detail ? int(std::min<size_t>(per_node, 8)) : 1;
  const int rows = detail ? int((per_node + 7) / 8) : 1;
  const size_t total_nodes = v.ranks_of_node.size();
  const double glyph = total_nodes > 1024 ? 9 : total_nodes > 256 ? 12 : 16;
  const double node_w = detail ? std::max(cols * cell + 8, 76.0) : glyph;
  const double node_h = detail ? 18 + rows * cell + 4 : glyph;
  const double node_gap = detail ? 10 : 3;
  const int per_row = std::max(1, int((inner + node_gap) / (node_w + node_gap)));

  std::string body;
  std::map<int, std::pair<double, double>> centre;  // node -> centre
  std::map<int, std::pair<double, double>> band_y;  // island -> top, bottom
  double y = pad;
  for (int id : v.islands) {
    const IslandInfo* isl = v.island(id);
    if (!isl) continue;
    std::set<int> stages;
    for (int n : isl->nodes)
      if (size_t(n) < total_nodes)
        for (int r : v.ranks_of_node[n]) stages.insert(v.stage_of(r));
    const int nrows = int((isl->nodes.size() + per_row - 1) / per_row);
    const double h = header + nrows * (node_h + node_gap) + band_pad;
    band_y[id] = {y, y + h};
    body += fmt::format("<g class=\"island\" data-island=\"{}\" data-kind=\"{}\" data-nodes=\"{}\">\n"
                        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" rx=\"8\" fill=\"{}\" stroke=\"{}\"/>\n"
                        "<text class=\"t\" x=\"{}\" y=\"{}\">island {} · {} · {} · {} · {}</text>\n",
                        id, escape(isl->kind), isl->nodes.size(), coord(pad), coord(y), coord(kWidth - 2 * pad),
                        coord(h), island_fill(isl->kind),
                        link_colour(isl->kind == "ib" ? LinkKind::kIb : isl->kind == "roce" ? LinkKind::kRoce
                                                                                              : LinkKind::kEthernet),
                        coord(pad + band_pad), coord(y + 16), id, escape(isl->kind), count_of(isl->nodes.size(), "node"),
                        count_of(isl->devices, "device"), stage_range(stages));
    for (size_t k = 0; k < isl->nodes.size(); ++k) {
      const int n = isl->nodes[k];
      const double nx = pad + band_pad + double(k % per_row) * (node_w + node_gap);
      const double ny = y + header + double(k / per_row) * (node_h + node_gap);
      centre[n] = {nx + node_w / 2, ny + node_h / 2};
      const std::vector<int> none;
      const std::vector<int>& ranks = size_t(n) < total_nodes ? v.ranks_of_node[n] : none;
      std::string title = fmt::format("node {} {}: {}", n, escape(v.host(n)), count_of(ranks.size(), "rank"));
      if (!ranks.empty()) title += fmt::format(" {}..{}", ranks.front(), ranks.back());
      if (detail) {
        const size_t chars = size_t(std::max(4.0, (node_w - 6) / 6));
        std::string label = fmt::format("{} {}", n, v.host(n));
        if (label.size() > chars) label = label.substr(0, chars - 1) + "~";
        body += fmt::format("<g class=\"node\" data-node=\"{}\"><title>{}</title><rect x=\"{}\" y=\"{}\" width=\"{}\" "
                            "height=\"{}\" rx=\"3\" fill=\"#fff\" stroke=\"#999\"/><text class=\"s\" x=\"{}\" y=\"{}\">{}"
                            "</text>\n",
                            n, title, coord(nx), coord(ny), coord(node_w), coord(node_h), coord(nx + 4), coord(ny + 12),
                            escape(label));
        for (size_t j = 0; j < ranks.size(); ++j) {
          const RankInfo& r = p.ranks[ranks[j]];
          body += fmt::format("<rect class=\"rank\" data-rank=\"{}\" data-stage=\"{}\" x=\"{}\" y=\"{}\" width=\"{}\" "
                              "height=\"{}\" fill=\"{}\"><title>rank {}: tp {}, stage {}, dp {}</title></rect>\n",
                              r.rank, r.at[Axis::kPp], coord(nx + 4 + double(j % 8) * cell), coord(ny + 17 + double(j / 8) * cell),
                              coord(cell - 2), coord(cell - 2), html::stage_colour(r.at[Axis::kPp], p.pp), r.rank, r.at[Axis::kTp], r.at[Axis::kPp], r.at[Axis::kDp]);
        }
        body += "</g>\n";
      } else {
        // One glyph: a strip per stage the node's ranks hold, as wide as its share of them.
        std::map<int, int> by_stage;
        for (int r : ranks) by_stage[v.stage_of(r)]++;
        body += fmt::format("<g class=\"node\" data-node=\"{}\"><title>{}{}</title>", n, title,
                            by_stage.empty() ? "" : fmt::format(", {}", stage_range([&] {
                              std::set<int> s;
                              for (const auto& [st, c] : by_stage) s.insert(st);
                              return s;
                            }())));
        if (by_stage.empty())
          body += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#ddd\"/>", coord(nx), coord(ny),
                              coord(glyph), coord(glyph));
        double sx = nx;
        for (const auto& [st, c] : by_stage) {
          const double w = glyph * c / double(ranks.size());
          body += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"/>", coord(sx), coord(ny),
                              coord(w), coord(glyph), html::stage_colour(st, p.pp));
          sx += w;
        }
        body += "</g>\n";
      }
    }
    body += "</g>\n";
    y += h + gap;
  }
  const double height = y - gap + pad;

  // Links. Pipeline neighbours on two nodes (detail: one line per node pair); every group
  // that crosses islands, summarised per pair of islands in the gap between their bands.
  std::map<std::pair<int, int>, NodeEdge> node_edges;
  std::map<std::pair<int, int>, std::map<GroupKey, int>> island_edges;
  std::map<std::pair<int, int>, LinkKind> hop_link;  // pipeline hops on a pp-hop group: its link
  for (const Group& g : p.groups)
    if (g.kind == kHopGroup && g.ranks.size() == 2) hop_link[{g.ranks[0], g.ranks[1]}] = g.link;
  for (const Group& g : p.groups) {
    if (g.ranks.size() < 2 || g.kind == kWorldGroup || g.kind == kHopGroup) continue;
    for (size_t i = 0; i + 1 < g.ranks.size(); ++i) {
      const int a = v.node_of(g.ranks[i]), b = v.node_of(g.ranks[i + 1]);
      if (a == b) continue;
      if (g.kind == kPpGroup) {
        NodeEdge& e = node_edges[{std::min(a, b), std::max(a, b)}];
        e.count++;
        const auto hop = hop_link.find({g.ranks[i], g.ranks[i + 1]});
        e.link = hop != hop_link.end() ? hop->second : g.link;
      }
      const int ia = size_t(a) < v.island_of_node.size() ? v.island_of_node[a] : 0;
      const int ib = size_t(b) < v.island_of_node.size() ? v.island_of_node[b] : 0;
      if (ia != ib) island_edges[{std::min(ia, ib), std::max(ia, ib)}][{kind_key(g.kind), g.transport, g.link}]++;
    }
  }
  std::string links;
  if (detail) {
    for (const auto& [ab, e] : node_edges) {
      const auto pa = centre.find(ab.first), pb = centre.find(ab.second);
      if (pa == centre.end() || pb == centre.end()) continue;
      auto [x1, y1] = pa->second;
      auto [x2, y2] = pb->second;
      // From the upper node's bottom edge to the lower one's top edge, bowed sideways so that
      // links between nodes of one row do not run through the nodes between them.
      const bool same_row = std::fabs(y1 - y2) < 1;
      if (!same_row) {
        if (y1 > y2) std::swap(x1, x2), std::swap(y1, y2);
        y1 += node_h / 2, y2 -= node_h / 2;
      } else {
        y1 -= node_h / 2, y2 -= node_h / 2;
      }
      const double mx = (x1 + x2) / 2 + (same_row ? 0 : 24), my = same_row ? y1 - 14 : (y1 + y2) / 2;
      const double cx = mx, cy = my;
      links += fmt::format("<path class=\"link\" data-kind=\"pp\" data-link=\"{}\" d=\"M{},{} Q{},{} {},{}\" fill=\"none\" "
                           "stroke=\"{}\" stroke-width=\"{}\" stroke-opacity=\"0.75\"{}><title>pipeline: {} link(s) "
                           "between nodes {} and {} over {}</title></path>\n",
                           to_string(e.link), coord(x1), coord(y1), coord(cx), coord(cy), coord(x2), coord(y2),
                           link_colour(e.link), coord(1.5 + std::log2(double(e.count))),
                           e.link == LinkKind::kEthernet ? " stroke-dasharray=\"6 3\"" : "", e.count, ab.first,
                           ab.second, to_string(e.link));
    }
  }
  for (const auto& [ab, kinds] : island_edges) {
    const auto ta = band_y.find(ab.first), tb = band_y.find(ab.second);
    if (ta == band_y.end() || tb == band_y.end()) continue;
    // Between the two bands (the upper one's bottom and the lower one's top).
    const double y_from = std::min(ta->second.second, tb->second.second);
    const double y_to = std::max(ta->second.first, tb->second.first);
    const bool adjacent = y_to - y_from < gap + 1;
    std::string text;
    LinkKind worst = LinkKind::kIntraNode;
    for (const auto& [k, n] : kinds) {
      const auto& [kind, transport, link] = k;
      text += fmt::format("{}{} {} link(s), {} over {}", text.empty() ? "" : "; ", n, kind.second,
                          to_string(transport), to_string(link));
      if (int(link) > int(worst)) worst = link;
    }
    const double ax = kWidth - pad - 30;
    links += fmt::format("<g class=\"island-link\" data-from=\"{}\" data-to=\"{}\"><line x1=\"{}\" x2=\"{}\" y1=\"{}\" "
                         "y2=\"{}\" stroke=\"{}\" stroke-width=\"4\"{}/><text x=\"{}\" y=\"{}\" text-anchor=\"end\">"
                         "island {} &#8596; {}: {}</text></g>\n",
                         ab.first, ab.second, coord(ax), coord(ax), coord(y_from), coord(y_to), link_colour(worst),
                         worst == LinkKind::kEthernet ? " stroke-dasharray=\"8 4\"" : "", coord(ax - 8),
                         coord(adjacent ? y_from + gap / 2 + 4 : y_from + 14), ab.first, ab.second, escape(text));
  }
  return fmt::format("<svg class=\"topology\" data-mode=\"{}\" viewBox=\"0 0 {} {}\" width=\"{}\" height=\"{}\" "
                     "xmlns=\"http://www.w3.org/2000/svg\">\n{}{}</svg>\n",
                     detail ? "ranks" : "nodes", kWidth, coord(height), kWidth, coord(height), body, links);
}

std::string links_table(const Plan& p) {
  std::map<GroupKey, GroupSummary> groups;
  for (const Group& g : p.groups) {
    GroupSummary& s = groups[{kind_key(g.kind), g.transport, g.link}];
    s.count++;
    s.size = std::max(s.size, g.ranks.size());
    s.crosses_islands = s.crosses_islands || g.crosses_islands;
  }
  std::string out = "<table class=\"links\"><tr><th>link class</th><th>bytes sent per step (all ranks)</th><th>groups on "
                    "it (count x size, transport)</th></tr>\n";
  for (int k = 0; k < kLinkKinds; ++k) {
    std::string on;
    for (const auto& [key, s] : groups) {
      const auto& [kind, transport, link] = key;
      if (int(link) != k) continue;
      on += fmt::format("{}{} {} x {}, {}{}", on.empty() ? "" : "<br>", kind.second, s.count, s.size,
                        to_string(transport), s.crosses_islands ? " (crosses islands)" : "");
    }
    if (on.empty() && p.estimate.bytes_per_step[k] == 0) continue;
    out += fmt::format("<tr class=\"link-class\" data-link=\"{0}\"><td><i class=\"sw\" style=\"background:{1}\"></i>{0}"
                       "</td><td class=\"n\">{2}</td><td>{3}</td></tr>\n",
                       to_string(LinkKind(k)), link_colour(LinkKind(k)), html::human_bytes(p.estimate.bytes_per_step[k]),
                       on.empty() ? "-" : on);
  }
  return out + "</table>\n";
}

std::string stage_table(const Plan& p) {
  std::vector<int> first_rank(p.stages.size(), -1);
  for (const RankInfo& r : p.ranks)
    if (r.at[Axis::kPp] >= 0 && size_t(r.at[Axis::kPp]) < first_rank.size() && first_rank[r.at[Axis::kPp]] < 0) first_rank[r.at[Axis::kPp]] = r.rank;
  double scale = 0;
  for (size_t s = 0; s < p.stages.size(); ++s)
    if (first_rank[s] >= 0 && size_t(first_rank[s]) < p.memory.size())
      scale = std::max({scale, p.memory[first_rank[s]].total(), p.memory[first_rank[s]].capacity});
  if (scale <= 0) scale = 1;
  const char* part_colour[] = {"#4c72b0", "#8172b2", "#ccb974", "#55a868", "#8c8c8c"};
  std::string out = "<table class=\"stages\"><tr><th>stage</th><th>layers</th><th>island</th><th>holds</th><th>TFLOP/s "
                    "per device</th><th>memory per device (params, grads, optimizer, activations, CUDA runtime) vs usable</th></tr>\n";
  for (size_t s = 0; s < p.stages.size(); ++s) {
    const Stage& st = p.stages[s];
    std::string bar = "-";
    if (first_rank[s] >= 0 && size_t(first_rank[s]) < p.memory.size()) {
      const RankMemory& m = p.memory[first_rank[s]];
      const double parts[] = {m.params, m.grads, m.optimizer, m.activations, m.runtime};
      const char* names[] = {"params", "grads", "optimizer", "activations", "CUDA runtime"};
      const double w = 260;
      bar = fmt::format("<svg class=\"mem\" viewBox=\"0 0 {0} 16\" width=\"{0}\" height=\"16\">", w + 4);
      double x = 0;
      for (int k = 0; k < 5; ++k) {
        const double pw = parts[k] / scale * w;
        bar += fmt::format("<rect x=\"{}\" y=\"2\" width=\"{}\" height=\"12\" fill=\"{}\"><title>{}: {:.2f} GiB</title>"
                           "</rect>",
                           coord(x), coord(pw), part_colour[k], names[k], parts[k] / kGiB);
        x += pw;
      }
      if (m.capacity > 0)
        bar += fmt::format("<line x1=\"{0}\" x2=\"{0}\" y1=\"0\" y2=\"16\" stroke=\"#000\" stroke-width=\"2\"/>",
                           coord(m.capacity / scale * w));
      bar += "</svg>";
      const bool over = m.capacity > 0 && m.total() > m.capacity;
      bar += fmt::format(" <span{}>{:.2f} GiB{}</span>", over ? " class=\"warn\"" : "", m.total() / kGiB,
                         m.capacity > 0 ? fmt::format(" of {:.1f} usable{}", m.capacity / kGiB, over ? ": does not fit" : "")
                                        : " (device memory unknown)");
    }
    std::string holds = st.embedding ? "embedding" : "";
    if (st.lm_head) holds += std::string(holds.empty() ? "" : ", ") + "final norm + LM head";
    out += fmt::format("<tr class=\"stage\" data-stage=\"{}\"><td><i class=\"sw\" style=\"background:{}\"></i>{}</td>"
                       "<td>{} ({})</td><td>{}{}</td><td>{}</td><td class=\"n\">{:.4g}</td><td>{}</td></tr>\n",
                       st.stage, html::stage_colour(st.stage, p.pp), st.stage, stage_layers(st), st.num_layers, st.island, st.straddles ? " (straddles)" : "",
                       holds.empty() ? "-" : holds, st.tflops, bar);
  }
  out += "</table>\n";
  out += html::legend({{"params", part_colour[0]}, {"grads", part_colour[1]}, {"optimizer", part_colour[2]},
                       {"activations", part_colour[3]}, {"CUDA runtime", part_colour[4]},
                       {"| usable device memory", "#000"}});
  return out;
}

std::string estimate_bars(const Plan& p) {
  const Estimate& e = p.estimate;
  std::vector<html::BarRow> rows;
  html::BarRow mine;
  mine.label = fmt::format("{} (this plan)", p.placement);
  mine.segments = {{"compute", "#4c72b0", e.compute_s - e.recompute_s},
                   {"recompute", "#8da0cb", e.recompute_s},
                   {"tensor comm", "#dd8452", e.tp_comm_s},
                   {"pipeline comm", "#c44e52", e.pp_comm_s},
                   {"bubble", "#bbbbbb", e.bubble_s},
                   {"data-parallel sync", "#55a868", e.dp_comm_s},
                   {"update", "#937860", e.update_s},
                   {"log exchange", "#8172b2", e.log_s},
                   {"job sums", "#64b5cd", e.sums_s},
                   {"CPU quota wait", "#da8bc3", e.quota_s}};
  mine.note = fmt::format("{:.4g} s per step, {} tokens/s", e.step_time_s, human_count(e.tokens_per_s));
  rows.push_back(mine);
  for (const Baseline& b : e.baselines) {
    html::BarRow r;
    r.label = fmt::format("{} (baseline)", b.placement);
    r.segments = {{"step time (baseline, not broken down)", "#999999", b.step_time_s}};
    r.note = fmt::format("{:.4g} s per step, {:.2f}x the plan's", b.step_time_s,
                         e.step_time_s > 0 ? b.step_time_s / e.step_time_s : 0);
    rows.push_back(r);
  }
  std::string out = html::stacked_bars("estimate", rows, "s");
  std::vector<std::pair<std::string, std::string>> keys;
  for (const html::Segment& s : mine.segments) keys.emplace_back(s.name, s.colour);
  keys.emplace_back("baseline step time", "#999999");
  return out + html::legend(keys);
}

}  // namespace

std::string plan_html_section(const Plan& p, const std::string& hash) {
  const View v(p);
  std::string out = fmt::format("<section class=\"plan\" data-world=\"{}\" data-islands=\"{}\" data-stages=\"{}\">\n",
                                p.world, v.islands.size(), p.stages.size());
  out += "<div class=\"facts\">";
  auto fact = [&](const std::string& k, const std::string& val) {
    out += fmt::format("<span><b>{}</b> {}</span>", escape(k), escape(val));
  };
  fact("ranks", fmt::format("{} = tensor {} x pipeline {} x data {}", p.world, p.tp, p.pp, p.dp));
  fact("device", p.device_kind);
  fact("placement", fmt::format("{}, {} partition", p.placement, p.partition));
  if (!p.model.empty()) fact("model", p.model);
  fact("parameters", human_count(double(p.params_model)));
  fact("batch", fmt::format("{} x {} tokens, {} micro-batch(es) of {}", p.global_batch, p.seq_len, p.micro_batches,
                            p.micro_batch));
  fact("schedule", fmt::format("{}{}", p.activation.schedule, p.schedule_chosen ? " (chosen)" : ""));
  fact("recompute", fmt::format("{}{}", p.activation.recompute, p.recompute_chosen ? " (chosen)" : ""));
  fact("estimate", fmt::format("{:.4g} s per step, {} tokens/s, {:.3g} TFLOP/s per device", p.estimate.step_time_s,
                               human_count(p.estimate.tokens_per_s), p.estimate.tflops_per_device));
  if (!p.calibration.empty()) fact("calibration", p.calibration.source.empty() ? "measured" : p.calibration.source);
  if (!hash.empty()) fact("plan hash", hash);
  out += "</div>\n<h2>Placement</h2>\n";
  std::vector<std::pair<std::string, std::string>> keys;
  const int shown = std::min(p.pp, 24);
  for (int s = 0; s < shown; ++s) keys.emplace_back(fmt::format("stage {}", s), html::stage_colour(s, p.pp));
  if (p.pp > shown) keys.emplace_back(fmt::format("... stage {}", p.pp - 1), html::stage_colour(p.pp - 1, p.pp));
  out += html::legend(keys);
  std::vector<std::pair<std::string, std::string>> link_keys;
  for (int k = 0; k < kLinkKinds; ++k)
    link_keys.emplace_back(fmt::format("{}: {} per step", to_string(LinkKind(k)),
                                       html::human_bytes(p.estimate.bytes_per_step[k])),
                           link_colour(LinkKind(k)));
  out += html::legend(link_keys);
  out += topology_svg(v);
  if (!v.detailed())
    out += fmt::format("<p>{} ranks on {} nodes: one glyph per node, split by the stages its ranks hold; groups are "
                       "summarised below.</p>\n",
                       p.world, v.ranks_of_node.size());
  out += "<h2>Links</h2>\n" + links_table(p);
  out += "<h2>Stages</h2>\n" + stage_table(p);
  out += "<h2>Estimate per step</h2>\n" + estimate_bars(p);
  if (!p.warnings.empty()) {
    out += "<h2>Warnings</h2>\n<ul>";
    for (const auto& w : p.warnings) out += "<li class=\"warn\">" + escape(w) + "</li>";
    out += "</ul>\n";
  }
  return out + "</section>\n";
}

std::string format_plan_html(const Plan& p) {
  const std::string title = fmt::format("holmes-train plan: {} ranks ({} x {} x {})", p.world, p.tp, p.pp, p.dp);
  return html::page(title, "<h1>" + escape(title) + "</h1>\n" + plan_html_section(p, fmt::format("{:016x}", plan_hash(p))));
}

}  // namespace holmes::plan
