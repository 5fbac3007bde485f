// Start-up phases of a multi-process job (engine/runtime/startup.hpp): the pure pieces, and
// the whole start_runtime with one thread per rank over a real TCP store and Gloo groups.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "engine/launch/local_launcher.hpp"
#include "common/errors.hpp"
#include "engine/spec/load.hpp"
#include "engine/topo/discover.hpp"
#include "engine/train/dist_run.hpp"
#include "engine/runtime/cluster_view.hpp"
#include "engine/runtime/startup.hpp"
#include "model/cpu/host_memory.hpp"

using namespace holmes;
using runtime::Runtime;

namespace {

spec::JobSpec tiny_spec(std::vector<std::string> sets) {
  for (const char* s : {"model.layers=4", "model.hidden=32", "model.heads=4", "train.micro_batch=2",
                        "train.global_batch=8", "train.seq_len=16", "cluster.timeout_s=20"})
    sets.insert(sets.begin(), s);
  return spec::load_job_spec("", sets).spec;
}

launch::LaunchEnv env_of(int rank, int world, int port, int local_world) {
  launch::LaunchEnv e;
  e.rank = rank;
  e.world_size = world;
  e.local_world_size = local_world;
  e.local_rank = rank % local_world;
  e.node_rank = rank / local_world;
  e.num_nodes = world / local_world;
  e.master_addr = "127.0.0.1";
  e.master_port = port;
  e.source = "torchrun";
  e.job_token = "test-token";
  return e;
}

// Runs body(rank) on `world` threads; rethrows the first exception of any thread.
void on_threads(int world, const std::function<void(int)>& body) {
  std::vector<std::exception_ptr> errors(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

topo::NodeReport cpu_node(const std::string& host, int devices) {
  topo::NodeReport r;
  r.hostname = host;
  r.devices.count = devices;
  r.devices.cores = 1;
  r.devices.memory_gb = 1;
  return r;
}

}  // namespace

TEST_CASE("agreement: identical lines pass, differences name the input and the ranks") {
  const auto a = runtime::agreement_line(1, 2, 3);
  REQUIRE_NOTHROW(runtime::check_agreement({a, a, a}));
  const auto plan_off = runtime::agreement_line(9, 2, 3);
  const auto topo_off = runtime::agreement_line(1, 2, 4);
  try {
    runtime::check_agreement({a, a, plan_off, topo_off});
    FAIL("no error");
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    CHECK_THAT(m, Catch::Contains("the plan hash differs from rank 0's on ranks [2]"));
    CHECK_THAT(m, Catch::Contains("the cluster topology differs from rank 0's on ranks [3]"));
    CHECK_THAT(m, !Catch::Contains("job spec"));
  }
}

TEST_CASE("spec digest follows every key, not where it came from") {
  auto a = tiny_spec({});
  auto b = tiny_spec({"train.lr=0.5"});
  CHECK(runtime::spec_digest(a) == runtime::spec_digest(tiny_spec({})));
  CHECK(runtime::spec_digest(a) != runtime::spec_digest(b));
}

TEST_CASE("node entries: one report per node from its local rank 0, in node order") {
  auto n0 = cpu_node("alpha", 2), n1 = cpu_node("beta", 2);
  std::vector<std::string> entries = {runtime::node_entry(1, 0, &n1), runtime::node_entry(1, 1, nullptr),
                                      runtime::node_entry(0, 0, &n0), runtime::node_entry(0, 1, nullptr)};
  auto g = runtime::gather_nodes(entries);
  REQUIRE(g.reports.size() == 2);
  CHECK(g.reports[0].hostname == "alpha");
  CHECK(g.reports[1].hostname == "beta");
  CHECK(g.node_of == std::vector<int>{1, 1, 0, 0});
  CHECK(g.local_of == std::vector<int>{0, 1, 0, 1});
  entries[2] = runtime::node_entry(0, 1, nullptr);
  CHECK_THROWS_WITH(runtime::gather_nodes(entries), Catch::Contains("node(s) [0] have no local rank 0"));
}

TEST_CASE("group binding: loopback inside a machine, the plan's interface across nodes") {
  plan::Group g;
  g.interface = "eth0,ens1";
  g.crosses_nodes = true;
  CHECK(runtime::group_net(g, true).address == "127.0.0.1");
  CHECK(runtime::group_net(g, false).iface == "eth0,ens1");
  g.crosses_nodes = false;
  CHECK(runtime::group_net(g, false).address == "127.0.0.1");
}

TEST_CASE("start_runtime: 4 ranks on threads get the plan's groups at their coordinates") {
  const int port = launch::pick_free_port("127.0.0.1");
  auto spec = tiny_spec({"parallel.tensor=2", "parallel.pipeline=2", "parallel.data=1"});
  std::vector<Runtime> rts(4);
  on_threads(4, [&](int r) { rts[r] = runtime::start_runtime(spec, env_of(r, 4, port, 4)); });
  for (int r = 0; r < 4; ++r) {
    const Runtime& rt = rts[r];
    CHECK(rt.plan_hash == rts[0].plan_hash);
    CHECK(rt.plan.world == 4);
    CHECK(rt.topology.nodes.size() == 1);
    CHECK(rt.topology.nodes[0].devices.count == 4);
    const auto& me = rt.plan.ranks[r];
    using schedule::Axis;
    REQUIRE(rt.group(plan::kTpGroup));
    REQUIRE(rt.group(plan::kPpGroup));
    REQUIRE(rt.group(plan::kEmbeddingGroup));
    CHECK_FALSE(rt.group(plan::kDpGroup));  // data degree 1: no group
    CHECK(rt.group(plan::kTpGroup)->rank() == me.at[Axis::kTp]);
    CHECK(rt.group(plan::kPpGroup)->rank() == me.at[Axis::kPp]);
    CHECK(rt.world_group().rank() == r);
    CHECK(rt.group(plan::kTpGroup)->transport() == "gloo tcp 127.0.0.1");
    // What Trainer gets: the coordinates, this stage's layers and the groups (no NCCL in a
    // CPU plan: phase 5 makes nothing).
    const runtime::DeviceComms device = runtime::connect_device_groups(rts[r], spec);
    CHECK(device.comms.empty());
    CHECK(device.log.empty());
    auto mem = holmes::model::cpu::make_host_memory();
    const auto groups = runtime::executor_groups(rt, device, *mem);
    CHECK(groups->place().degree(Axis::kTp) == 2);
    CHECK(groups->place().degree(Axis::kPp) == 2);
    CHECK(groups->place().degree(Axis::kDp) == 1);
    CHECK(groups->place().at == me.at);
    CHECK(groups->group(Axis::kTp).size() == 2);
    CHECK(groups->group(Axis::kTp).mode() == parallel::Group::Mode::kHost);
    CHECK(groups->group(Axis::kDp).size() == 1);
    CHECK(groups->group(plan::kEmbeddingGroup).size() == 2);
    CHECK(groups->describe().size() == 3);  // tp, pp, embedding
    // And the rank plan its trainer runs: this stage's layers, as the plan cut them.
    const schedule::RankPlan& rp = rt.rank_plan;
    CHECK(rp.place == groups->place());
    REQUIRE(rp.chunks.size() == 1);
    CHECK(rp.chunks[0].first_layer == rt.plan.stages[me.at[Axis::kPp]].first_layer);
    CHECK(rp.chunks[0].num_layers == rt.plan.stages[me.at[Axis::kPp]].num_layers);
    CHECK(rp.micro_batches == rt.plan.micro_batches);
  }
  int layers = 0;
  for (const auto& st : rts[0].plan.stages) layers += st.num_layers;
  CHECK(layers == 4);
  // The groups talk: tensor-parallel sums of the global ranks.
  std::vector<float> sums(4);
  on_threads(4, [&](int r) {
    float v = static_cast<float>(r);
    rts[r].group(plan::kTpGroup)->all_reduce(std::span<float>(&v, 1), comm::ReduceOp::kSum);
    sums[r] = v;
  });
  for (int r = 0; r < 4; ++r) {
    float expect = 0;
    for (int m : rts[r].group(plan::kTpGroup)->global_ranks()) expect += static_cast<float>(m);
    CHECK(sums[r] == expect);
  }
}

TEST_CASE("start_runtime: degrees whose product is not the world size are a UserError") {
  const int port = launch::pick_free_port("127.0.0.1");
  auto spec = tiny_spec({"parallel.tensor=2", "parallel.pipeline=1", "parallel.data=1"});
  std::vector<std::string> messages(3);
  on_threads(3, [&](int r) {
    try {
      runtime::start_runtime(spec, env_of(r, 3, port, 3));
    } catch (const UserError& e) {
      messages[r] = e.what();
    }
  });
  for (const auto& m : messages) {
    CHECK_THAT(m, Catch::Contains("parallel.tensor"));
    CHECK_THAT(m, Catch::Contains("3 devices"));
  }
}

TEST_CASE("start_runtime: a rank that never comes is named after the time-out") {
  const int port = launch::pick_free_port("127.0.0.1");
  auto spec = tiny_spec({"cluster.timeout_s=1", "parallel.data=2"});
  std::string message;
  try {
    runtime::start_runtime(spec, env_of(0, 2, port, 2));  // rank 1 never starts
  } catch (const std::exception& e) {
    message = e.what();
  }
  CHECK_THAT(message, Catch::Contains("[1]"));
}

TEST_CASE("worker threads: OMP_NUM_THREADS wins, else the cores split between the local workers") {
  const char* old = std::getenv("OMP_NUM_THREADS");
  const std::string saved = old ? old : "";
  setenv("OMP_NUM_THREADS", "3", 1);
  CHECK(train::worker_threads(8) == 3);
  unsetenv("OMP_NUM_THREADS");
  const int one = train::worker_threads(1);
  CHECK(one >= 1);
  CHECK(train::worker_threads(2) == std::max(1, one / 2));
  CHECK(train::worker_threads(one * 4) == 1);
  if (old) setenv("OMP_NUM_THREADS", saved.c_str(), 1);
}

TEST_CASE("HOLMES_NODE_NAME names the node in every launch mode, unset keeps the machine name") {
  std::map<std::string, std::string> env = {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"HOLMES_NODE_NAME", "n7"}};
  CHECK(launch::detect_launch_env(env, 0, "job").node_name == "n7");
  CHECK(launch::detect_launch_env({{"HOLMES_NODE_NAME", "n8"}}, 0, "job").node_name == "n8");
  CHECK(launch::detect_launch_env({}, 0, "job").node_name.empty());
}

TEST_CASE("GPU workers: one per GPU, HOLMES_WORKERS_PER_GPU lets n share one, a bad value names the variable") {
  const char* old = std::getenv("HOLMES_WORKERS_PER_GPU");
  const std::string saved = old ? old : "";
  topo::Devices gpu;
  gpu.kind = "cuda";
  gpu.count = 1;
  gpu.name = "H100";
  gpu.memory_gb = 80;
  // Workers sharing a GPU share its memory in the plan; one per GPU keeps it whole.
  const topo::Devices shared = runtime::gpu_worker_devices(gpu, 4);
  CHECK((shared.count == 4 && shared.memory_gb == 20 && shared.kind == "cuda"));
  topo::Devices two = gpu;
  two.count = 2;
  CHECK(runtime::gpu_worker_devices(two, 2).memory_gb == 80);
  unsetenv("HOLMES_WORKERS_PER_GPU");
  CHECK(runtime::workers_per_gpu() == 1);
  CHECK_NOTHROW(runtime::check_node_capacity(gpu, 1, "--nproc-per-node 1"));
  CHECK_THROWS_WITH(runtime::check_node_capacity(gpu, 2, "--nproc-per-node 2"),
                    Catch::Contains("1 worker(s) per device (HOLMES_WORKERS_PER_GPU), so at most 1"));
  setenv("HOLMES_WORKERS_PER_GPU", "4", 1);
  CHECK(runtime::workers_per_gpu() == 4);
  CHECK_NOTHROW(runtime::check_node_capacity(gpu, 4, "--nproc-per-node 4"));
  CHECK_THROWS_AS(runtime::check_node_capacity(gpu, 5, "--nproc-per-node 5"), UserError);
  for (const char* bad : {"0", "65"}) {
    setenv("HOLMES_WORKERS_PER_GPU", bad, 1);
    CHECK_THROWS_WITH(runtime::workers_per_gpu(),
                      Catch::Contains("HOLMES_WORKERS_PER_GPU=" + std::string(bad) + " is out of range") &&
                          Catch::Contains("accepted: 1..64"));
  }
  for (const char* bad : {"two", "2x"}) {
    setenv("HOLMES_WORKERS_PER_GPU", bad, 1);
    CHECK_THROWS_WITH(runtime::workers_per_gpu(),
                      Catch::Contains("HOLMES_WORKERS_PER_GPU='" + std::string(bad) + "' is not an integer") &&
                          Catch::Contains("accepted: 1..64"));
  }
  if (old)
    setenv("HOLMES_WORKERS_PER_GPU", saved.c_str(), 1);
  else
    unsetenv("HOLMES_WORKERS_PER_GPU");
}

namespace {

// A group that only records whether it was aborted.
class AbortRecorder final : public comm::ProcessGroup {
 public:
  explicit AbortRecorder(int& aborts) : ProcessGroup(comm::GroupSpec{"rec", {0}, 0}), aborts_(aborts) {}
  std::string transport() const override { return "recorder"; }
  void all_reduce(std::span<float>, comm::ReduceOp, const comm::OpOptions&) override {}
  void reduce_scatter(std::span<float>, std::span<const float>, comm::ReduceOp, const comm::OpOptions&) override {}
  void all_gather(std::span<float>, std::span<const float>, const comm::OpOptions&) override {}
  void broadcast(std::span<float>, int, const comm::OpOptions&) override {}
  void send_recv(std::span<const comm::P2POp>, const comm::OpOptions&) override {}
  using comm::ProcessGroup::all_to_all_v;
  void all_to_all_v(void*, std::span<const size_t>, const void*, std::span<const size_t>, comm::DType,
                    const comm::OpOptions&) override {}
  void barrier(const comm::OpOptions&) override {}
  void abort() noexcept override { ++aborts_; }

 private:
  int& aborts_;
};

}  // namespace

TEST_CASE("a failing step aborts the NCCL groups before the trainer's device memory is freed") {
  int aborts = 0;
  runtime::DeviceComms comms;
  comms.comms.push_back({0, plan::kTpGroup, std::make_unique<AbortRecorder>(aborts)});
  comms.comms.push_back({1, plan::kDpGroup, std::make_unique<AbortRecorder>(aborts)});
  {  // a scope left normally aborts nothing
    const runtime::AbortOnUnwind guard(comms);
  }
  CHECK(aborts == 0);
  int aborts_when_trainer_freed = -1;
  struct Trainer {  // stands in for what owns the device memory
    int& seen;
    const int& aborts;
    ~Trainer() { seen = aborts; }
  };
  try {
    Trainer trainer{aborts_when_trainer_freed, aborts};
    const runtime::AbortOnUnwind guard(comms);
    throw std::runtime_error("a peer died");
  } catch (const std::runtime_error&) {
  }
  CHECK(aborts == 2);                      // every device group
  CHECK(aborts_when_trainer_freed == 2);  // before the memory went
}

TEST_CASE("group time-outs: longer inside the replicas of an elastic job, the configured one elsewhere") {
  using std::chrono::milliseconds;
  const spec::JobSpec plain = tiny_spec({"parallel.replicas=2", "parallel.outer=diloco", "parallel.data=2"});
  const spec::JobSpec elastic =
      tiny_spec({"parallel.replicas=2", "parallel.outer=diloco", "parallel.data=2", "parallel.elastic=true"});
  for (auto kind : {plan::kDpGroup, plan::kPpGroup, plan::kOuterGroup, plan::kWorldGroup})
    CHECK(runtime::group_timeout(plain, kind) == milliseconds(20'000));
  // A rank inside a replica may wait for a peer that waits, up to the time-out, across replicas.
  CHECK(runtime::group_timeout(elastic, plan::kDpGroup) == milliseconds(50'000));
  CHECK(runtime::group_timeout(elastic, plan::kPpGroup) == milliseconds(50'000));
  CHECK(runtime::group_timeout(elastic, plan::kOuterGroup) == milliseconds(20'000));
  CHECK(runtime::group_timeout(elastic, plan::kWorldGroup) == milliseconds(20'000));
}
