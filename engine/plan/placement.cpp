#include "engine/plan/placement.hpp"

#include <algorithm>
#include <numeric>

namespace holmes::plan {

DeviceTable make_device_table(const Facts& f) {
  DeviceTable d;
  for (int n = 0; n < static_cast<int>(f.nodes.size()); ++n) {
    d.first_rank.push_back(static_cast<int>(d.node_of.size()));
    for (int l = 0; l < f.nodes[n].devices; ++l) {
      d.node_of.push_back(n);
      d.local_of.push_back(l);
    }
  }
  return d;
}

namespace {

void count_crossings(const Facts& f, const DeviceTable& d, Layout& lay) {
  lay.tp_groups_crossing_nodes = 0;
  lay.dp_groups_crossing_islands = 0;
  for (int g = 0; g < lay.grid.group_count(Axis::kTp); ++g) {
    auto members = lay.grid.group(Axis::kTp, g);
    int node = d.node_of[lay.rank_at[members[0]]];
    for (int v : members)
      if (d.node_of[lay.rank_at[v]] != node) {
        ++lay.tp_groups_crossing_nodes;
        break;
      }
  }
  for (int g = 0; g < lay.grid.group_count(Axis::kDp); ++g) {
    auto members = lay.grid.group(Axis::kDp, g);
    int island = f.nodes[d.node_of[lay.rank_at[members[0]]]].island;
    for (int v : members)
      if (f.nodes[d.node_of[lay.rank_at[v]]].island != island) {
        ++lay.dp_groups_crossing_islands;
        break;
      }
  }
}

Layout finish(const Facts& f, const DeviceTable& d, RankGrid grid, std::vector<int> rank_at,
              std::vector<int> island_order) {
  Layout lay;
  lay.grid = grid;
  lay.rank_at = std::move(rank_at);
  lay.index_of.assign(lay.rank_at.size(), 0);
  for (int v = 0; v < static_cast<int>(lay.rank_at.size()); ++v) lay.index_of[lay.rank_at[v]] = v;
  lay.island_order = std::move(island_order);
  count_crossings(f, d, lay);
  return lay;
}

}  // namespace

Layout naive_layout(const Facts& f, const DeviceTable& d, int tp, int pp, int dp, const std::string& order) {
  std::vector<int> rank_at(d.node_of.size());
  std::iota(rank_at.begin(), rank_at.end(), 0);
  // The islands in the order the pipeline first meets them, for the report.
  RankGrid grid(tp, pp, dp, order);
  std::vector<int> islands;
  for (int s = 0; s < pp; ++s) {
    int isl = f.nodes[d.node_of[grid.index(Coords{0, s, 0})]].island;
    if (std::find(islands.begin(), islands.end(), isl) == islands.end()) islands.push_back(isl);
  }
  return finish(f, d, grid, std::move(rank_at), std::move(islands));
}

std::vector<std::vector<int>> island_orders(const Facts& f, int stage_devices) {
  std::vector<int> devices(f.islands, 0);
  std::vector<int> kind(f.islands, 2);  // 0 IB, 1 RoCE, 2 Ethernet
  for (const auto& n : f.nodes) {
    devices[n.island] += n.devices;
    kind[n.island] = n.island_link == LinkKind::kIb ? 0 : n.island_link == LinkKind::kRoce ? 1 : 2;
  }
  std::vector<int> base;
  for (int i = 0; i < f.islands; ++i)
    if (devices[i] > 0) base.push_back(i);
  std::vector<std::vector<int>> out{base};
  auto add = [&](auto less) {
    auto o = base;
    std::stable_sort(o.begin(), o.end(), less);
    if (std::find(out.begin(), out.end(), o) == out.end()) out.push_back(o);
  };
  add([&](int a, int b) { return kind[a] != kind[b] ? kind[a] < kind[b] : devices[a] > devices[b]; });
  add([&](int a, int b) { return devices[a] > devices[b]; });
  add([&](int a, int b) { return devices[a] < devices[b]; });
  auto whole = [&](int i) { return devices[i] % stage_devices == 0; };
  add([&](int a, int b) { return whole(a) != whole(b) ? whole(a) : devices[a] > devices[b]; });
  add([&](int a, int b) { return whole(a) != whole(b) ? whole(a) : devices[a] < devices[b]; });
  return out;
}

Layout holmes_layout(const Facts& f, const DeviceTable& d, int tp, int pp, int dp,
                     const std::vector<int>& island_order) {
  std::vector<std::vector<int>> members(f.islands);
  for (int n = 0; n < static_cast<int>(f.nodes.size()); ++n) members[f.nodes[n].island].push_back(n);
  std::vector<int> rank_at;
  rank_at.reserve(d.node_of.size());
  for (int isl : island_order)
    for (int n : members[isl])
      for (int l = 0; l < f.nodes[n].devices; ++l) rank_at.push_back(d.first_rank[n] + l);
  return finish(f, d, RankGrid(tp, pp, dp, "tp-dp-pp"), std::move(rank_at), island_order);
}

}  // namespace holmes::plan
