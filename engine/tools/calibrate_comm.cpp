// The collectives of a calibrate run: all-reduce, reduce-scatter, all-gather and send/recv,
// swept over message and group size on every link class the job's ranks have between them,
// through the project's own groups: Gloo on host memory for CPU jobs, NCCL on device memory
// on GPUs (the buffers training uses).
#include "engine/tools/calibrate_comm.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <set>

#include "backends/backends.hpp"
#include "comm/gloo_group.hpp"
#include "engine/plan/links.hpp"
#include "engine/runtime/nccl_env.hpp"
#include "engine/runtime/startup.hpp"

namespace holmes::tools {

namespace {

// Bytes per rank: 4 KiB to 64 MiB by 4 (16 MiB on CPUs, whose Gloo copies cost seconds there).
std::vector<double> sweep_bytes(bool gpu) {
  std::vector<double> out;
  for (double b = 4096; b <= (gpu ? 64.0 : 16.0) * (1 << 20); b *= 4) out.push_back(b);
  return out;
}

// The groups a class is measured on: members (global ranks) of each size.
struct ClassGroups {
  std::string link, intra;
  std::vector<std::vector<int>> groups;  // ascending sizes
  std::string net;                       // NCCL's netName ("" inside a node)
  comm::GlooNet gloo;
};

std::vector<int> sizes_up_to(int n) {
  std::vector<int> s;
  for (int g = 2; g < n; g *= 2) s.push_back(g);
  if (n >= 2) s.push_back(n);
  return s;
}

// Inside node 0 (its ranks), and between nodes for each class between them: one rank per node,
// the nodes that reach each other over that class (an island for RDMA, one per island or every
// node for Ethernet).
std::vector<ClassGroups> class_groups(const runtime::Runtime& rt, const spec::JobSpec& spec) {
  std::vector<ClassGroups> out;
  const plan::Facts f = plan::collect_facts(spec, rt.topology);
  std::map<int, std::vector<int>> ranks_of;  // node -> global ranks
  for (const auto& r : rt.plan.ranks) ranks_of[r.node].push_back(r.rank);
  const std::vector<int>& local = ranks_of.begin()->second;
  if (local.size() >= 2) {
    ClassGroups c{"intra-node", f.nodes[ranks_of.begin()->first].intra_class, {}, "", {"", "127.0.0.1"}};
    for (int g : sizes_up_to(static_cast<int>(local.size()))) c.groups.emplace_back(local.begin(), local.begin() + g);
    out.push_back(c);
  }
  const int nodes = static_cast<int>(f.nodes.size());
  std::map<plan::LinkKind, std::vector<int>> reach;  // class -> nodes joined by it (from node 0 or an island)
  for (int a = 0; a < nodes; ++a)
    for (int b = a + 1; b < nodes; ++b) {
      const plan::LinkKind k = plan::link_between(f, a, b, false).kind;
      auto& v = reach[k];
      for (int n : {a, b})
        if (std::find(v.begin(), v.end(), n) == v.end()) v.push_back(n);
    }
  for (auto& [kind, members] : reach) {
    std::sort(members.begin(), members.end());
    ClassGroups c{plan::to_string(kind), "", {}, kind == plan::LinkKind::kEthernet ? "Socket" : "IB", {}};
    c.gloo.iface = kind == plan::LinkKind::kEthernet ? f.nodes[members[0]].ethernet_if : f.nodes[members[0]].island_if;
    for (int g : sizes_up_to(static_cast<int>(members.size()))) {
      std::vector<int> group;
      for (int i = 0; i < g; ++i) group.push_back(ranks_of.at(members[i]).front());
      c.groups.push_back(group);
    }
    out.push_back(c);
  }
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

std::vector<topo::CollectiveCurve> measure_collectives(runtime::Runtime& rt, const spec::JobSpec& spec,
                                                       model::Backend& backend,
                                                       const std::function<void(const std::string&)>& say) {
  std::vector<topo::CollectiveCurve> curves;
  const bool gpu = backend.device == "cuda";
  device::DeviceMemory& mem = *backend.memory;
  if (gpu) {
    runtime::apply_nccl_env(rt.plan, rt.node);
    // Ranks sharing a GPU (HOLMES_WORKERS_PER_GPU): each process a host of its own for NCCL's
    // duplicate-GPU check, as a training job's start-up does (engine/runtime/startup.cpp).
    if (rt.topology.nodes.at(rt.node).devices.per_gpu > 1 && std::getenv("NCCL_HOSTID") == nullptr) {
      const std::string id = fmt::format("holmes-calibrate-{}-rank{}", rt.plan.hostnames.at(rt.node), rt.rank);
      ::setenv("NCCL_HOSTID", id.c_str(), 1);
    }
  }
  const std::string device = rt.topology.nodes.at(rt.node).devices.name;
  const std::vector<double> sizes = sweep_bytes(gpu);
  const size_t max_floats = static_cast<size_t>(sizes.back() / sizeof(float));
  device::DeviceArray<float> a(mem, max_floats), b(mem, max_floats);
  a.zero(), b.zero();
  constexpr int kReps = 5;
  int serial = 0;
  for (const ClassGroups& c : class_groups(rt, spec)) {
    for (const std::vector<int>& members : c.groups) {
      const bool in = std::find(members.begin(), members.end(), rt.rank) != members.end();
      const int d = static_cast<int>(members.size());
      std::unique_ptr<comm::ProcessGroup> g;
      comm::GroupSpec gs{fmt::format("calibrate/{}/{}", c.link, serial++), members, rt.rank, runtime::timeout_of(spec)};
      if (in) g = gpu ? backends::make_nccl_group(rt.store, gs, c.net) : comm::make_gloo_group(rt.store, gs, c.gloo);
      for (const char* op : topo::kCollectiveOps) {
        const std::string name = op;
        if (name == "send_recv" && d != 2) continue;  // a pipeline hop: two members
        topo::CollectiveCurve curve{device, c.link, c.intra, gpu ? "nccl" : "gloo", name, d, {}, 0, 0};
        for (double bytes : sizes) {
          const size_t n = static_cast<size_t>(bytes / sizeof(float)) / d * d;
          if (n == 0) continue;
          std::vector<double> t;
          for (int rep = 0; in && rep <= kReps; ++rep) {
            g->barrier();
            comm::OpOptions o;
            o.stream = mem.stream();
            const auto t0 = std::chrono::steady_clock::now();
            if (name == "all_reduce") g->all_reduce(std::span<float>(a.data(), n), comm::ReduceOp::kSum, o);
            else if (name == "reduce_scatter")
              g->reduce_scatter(std::span<float>(b.data(), n / d), std::span<const float>(a.data(), n),
                                comm::ReduceOp::kSum, o);
            else if (name == "all_gather")
              g->all_gather(std::span<float>(a.data(), n), std::span<const float>(b.data(), n / d), o);
            else {
              const comm::P2POp ops[] = {{comm::P2POp::kSend, std::span<float>(a.data(), n), 1 - g->rank(), 7},
                                         {comm::P2POp::kRecv, std::span<float>(b.data(), n), 1 - g->rank(), 7}};
              g->send_recv(ops, o);
            }
            mem.synchronize();
            if (rep > 0) t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
          }
          if (in) curve.points.emplace_back(double(n) * sizeof(float), median(t));
        }
        if (!in || members.front() != rt.rank) continue;  // the group's first member records
        topo::fit_curve(curve);
        say(fmt::format("{}{} {} over {} ranks ({}): alpha {:.3g} us, bus {:.4g} Gb/s", c.link,
                        c.intra.empty() ? "" : " (" + c.intra + ")", name, d, curve.transport, curve.alpha_us,
                        curve.bus_gbps));
        curves.push_back(std::move(curve));
      }
      rt.world_group().barrier();
    }
  }
  return curves;
}

}  // namespace holmes::tools
