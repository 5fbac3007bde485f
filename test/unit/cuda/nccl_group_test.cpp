// The NCCL process group (comm/nccl): libnccl is opened at run time, never linked; groups of
// one member on each network run every operation on the GPU; a member that never joins or
// a GPU shared by two members ends in a CommError within the time-out, never a hang.
// Without a GPU the tests that need one print HOLMES_SKIP (ctest: Skipped).
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <thread>

#include "binary_path.hpp"
#include "comm/errors.hpp"
#include "comm/nccl/nccl_api.hpp"
#include "comm/nccl/nccl_group.hpp"
#include "comm/tcp_store.hpp"
#include "test/unit/cuda/cuda_test_util.hpp"

namespace hc = holmes::comm;
using namespace std::chrono_literals;

namespace {

std::shared_ptr<hc::TcpStore> host_store() { return hc::TcpStore::host({"", 0, "nccl-test", 10s}); }

std::shared_ptr<hc::Store> client_store(const hc::TcpStore& host) {
  return hc::TcpStore::connect({"127.0.0.1", host.port(), "nccl-test", 10s});
}

// Device copy of `host`, freed with the returned handle.
std::unique_ptr<float, void (*)(float*)> to_device(const std::vector<float>& host) {
  float* d = nullptr;
  REQUIRE(cudaMalloc(reinterpret_cast<void**>(&d), host.size() * sizeof(float)) == cudaSuccess);
  REQUIRE(cudaMemcpy(d, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
  return {d, [](float* p) { cudaFree(p); }};
}

std::vector<float> to_host(const float* d, size_t n, cudaStream_t s) {
  std::vector<float> out(n);
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  REQUIRE(cudaMemcpy(out.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
  return out;
}

// Whether this machine has an RDMA device NCCL's IB transport could open.
bool has_rdma_device() {
  std::error_code ec;
  return std::filesystem::exists("/sys/class/infiniband", ec) &&
         !std::filesystem::is_empty("/sys/class/infiniband", ec);
}

// Every operation of a group of one member, on a stream, against the values a single
// member must get (the identity for each collective).
void run_every_op(hc::ProcessGroup& g, cudaStream_t s) {
  const std::vector<float> v = {1.5f, -2.f, 3.25f, 7.f, -0.5f};  // odd length on purpose
  auto d = to_device(v);
  auto out = to_device(std::vector<float>(v.size(), 0.f));
  hc::OpOptions o;
  o.stream = s;
  g.all_reduce({d.get(), v.size()}, hc::ReduceOp::kSum, o);
  CHECK(to_host(d.get(), v.size(), s) == v);
  g.all_reduce({d.get(), v.size()}, hc::ReduceOp::kMax, o);
  g.reduce_scatter({out.get(), v.size()}, {d.get(), v.size()}, hc::ReduceOp::kSum, o);
  CHECK(to_host(out.get(), v.size(), s) == v);
  REQUIRE(cudaMemsetAsync(out.get(), 0, v.size() * sizeof(float), s) == cudaSuccess);
  g.all_gather({out.get(), v.size()}, {d.get(), v.size()}, o);
  CHECK(to_host(out.get(), v.size(), s) == v);
  g.broadcast({d.get(), v.size()}, 0, o);
  g.barrier(o);
  CHECK(to_host(d.get(), v.size(), s) == v);
  REQUIRE(cudaMemsetAsync(out.get(), 0, v.size() * sizeof(float), s) == cudaSuccess);
  g.all_to_all({out.get(), v.size()}, {d.get(), v.size()}, o);  // this member's own block: a send to itself
  CHECK(to_host(out.get(), v.size(), s) == v);
  REQUIRE(cudaMemsetAsync(out.get(), 0, v.size() * sizeof(float), s) == cudaSuccess);
  const std::vector<size_t> counts = {v.size()};
  g.all_to_all_v({out.get(), v.size()}, counts, {d.get(), v.size()}, counts, o);
  CHECK(to_host(out.get(), v.size(), s) == v);
  CHECK_THROWS_AS(g.broadcast({d.get(), v.size()}, 1, o), std::invalid_argument);
  CHECK_THROWS_AS(g.send({d.get(), v.size()}, 0, 1, o), std::invalid_argument);  // no other member
}

}  // namespace

TEST_CASE("libnccl is opened at run time from the toolkit, never linked", "[nccl]") {
  std::string why;
  INFO(why);
  REQUIRE(hc::nccl_available(&why));
  CHECK(hc::nccl_version() >= hc::kMinNcclVersion);
  CHECK(hc::nccl_version() / 10000 == NCCL_MAJOR);
  CHECK(hc::nccl_path().find("libnccl.so") != std::string::npos);
  std::printf("NCCL %d from %s\n", hc::nccl_version(), hc::nccl_path().c_str());  // for gpu_check.sh
  std::array<char, 512> buf{};
  std::string deps;
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(("ldd '" + holmes_train_binary() + "' 2>&1").c_str(), "r"), pclose);
  REQUIRE(pipe);
  while (std::fgets(buf.data(), buf.size(), pipe.get())) deps += buf.data();
  INFO(deps);
  REQUIRE(deps.find("libc.so") != std::string::npos);  // ldd read the binary
  CHECK(deps.find("libnccl") == std::string::npos);
}

TEST_CASE("make_nccl_group accepts the IB and Socket networks, or none for a node-local group", "[nccl]") {
  auto store = host_store();
  hc::GroupSpec spec{"badnet", {0}, 0, 2s};
  CHECK_THROWS_AS(hc::make_nccl_group(store, spec, "Ethernet"), std::invalid_argument);
  CHECK_THROWS_AS(hc::make_nccl_group(store, spec, "ib"), std::invalid_argument);
}

TEST_CASE("without a GPU, creating an NCCL group is a CommError naming the group", "[nccl]") {
  std::string none;
  if (!holmes::cuda::query_gpus(&none).empty()) {
    // A GPU is there: the groups below are created for real instead.
    std::printf("a GPU is present; the no-GPU failure path is not reachable here\n");
    return;
  }
  auto store = host_store();
  try {
    hc::make_nccl_group(store, hc::GroupSpec{"tp0", {0}, 0, 5s}, "Socket");
    FAIL("an NCCL group was created without a GPU");
  } catch (const hc::CommError& e) {
    INFO(e.what());
    CHECK(e.where().op == "connect");
    CHECK(e.where().group == "tp0");
    CHECK(std::string(e.what()).find("net Socket") != std::string::npos);
  }
}

TEST_CASE("NCCL groups of one member run every operation, on each network", "[nccl]") {
  if (!holmes::cuda::test::gpu_or_skip()) return;
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  cudaStream_t s = nullptr;
  REQUIRE(cudaStreamCreate(&s) == cudaSuccess);
  auto store = host_store();
  for (const char* net : {"Socket", "IB"}) {
    INFO("net " << net);
    std::unique_ptr<hc::ProcessGroup> g;
    try {
      g = hc::make_nccl_group(store, hc::GroupSpec{std::string("one-") + net, {0}, 0, 30s}, net);
    } catch (const hc::CommError& e) {
      // NCCL's IB transport needs an RDMA device; without one the failure must be this clean one.
      std::printf("net %s: %s\n", net, e.what());
      CHECK(std::string(net) == "IB");
      CHECK_FALSE(has_rdma_device());
      continue;
    }
    CHECK(g->transport() == std::string("nccl ") + net);
    run_every_op(*g, s);
  }
  cudaStreamDestroy(s);
}

TEST_CASE("host time per enqueued NCCL operation (a measurement, printed for the GPU check)", "[nccl]") {
  // A node-local group of one member: what a tensor-parallel sum costs the host to enqueue
  // (issue 30: polls that slept 50 us left the GPU waiting on the host). Printed, not
  // asserted: speed belongs to benchmarks, and scripts/gpu_check.sh puts it in its table.
  if (!holmes::cuda::test::gpu_or_skip()) return;
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  cudaStream_t s = nullptr;
  REQUIRE(cudaStreamCreate(&s) == cudaSuccess);
  auto store = host_store();
  auto g = hc::make_nccl_group(store, hc::GroupSpec{"host-time", {0}, 0, 30s}, "");
  auto x = to_device(std::vector<float>(1024, 1.0f));
  constexpr int kOps = 2000;
  for (int i = 0; i < 100; ++i) g->all_reduce({x.get(), 1024}, hc::ReduceOp::kSum, {.stream = s});  // warm-up
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kOps; ++i) g->all_reduce({x.get(), 1024}, hc::ReduceOp::kSum, {.stream = s});
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / kOps;
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  std::printf("nccl host time per all_reduce enqueue: %.2f us (%d ops, 4 KiB, one member)\n", us, kOps);
  g.reset();
  cudaStreamDestroy(s);
}

TEST_CASE("an NCCL group whose other member never joins fails within the time-out, naming it", "[nccl]") {
  if (!holmes::cuda::test::gpu_or_skip()) return;
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  auto store = host_store();
  const auto t0 = std::chrono::steady_clock::now();
  try {
    hc::make_nccl_group(store, hc::GroupSpec{"lonely", {4, 9}, 4, 3s}, "Socket");
    FAIL("the group was created with a member missing");
  } catch (const hc::CommError& e) {
    INFO(e.what());
    CHECK(e.where().op == "connect");
    CHECK(e.where().peer == 1);
    CHECK(e.where().peer_global == 9);
    CHECK(std::string(e.what()).find("never joined") != std::string::npos);
  }
  CHECK(std::chrono::steady_clock::now() - t0 < 20s);
}

TEST_CASE("two members on one GPU end in the same clean outcome, never a hang", "[nccl]") {
  if (!holmes::cuda::test::gpu_or_skip()) return;
  auto host = host_store();
  std::array<std::string, 2> outcome;
  std::array<std::thread, 2> threads;
  for (int r = 0; r < 2; ++r)
    threads[r] = std::thread([&, r] {
      cudaSetDevice(0);
      try {
        auto g = hc::make_nccl_group(r == 0 ? std::shared_ptr<hc::Store>(host) : client_store(*host),
                                     hc::GroupSpec{"shared", {0, 1}, r, 10s}, "Socket");
        outcome[r] = "created";
      } catch (const hc::CommError& e) {
        outcome[r] = "CommError";
        std::printf("rank %d: %s\n", r, e.what());
      } catch (const std::exception& e) {
        outcome[r] = std::string("other: ") + e.what();
      }
    });
  for (auto& t : threads) t.join();
  // NCCL refuses two ranks of one communicator on one GPU ("Duplicate GPU detected").
  CHECK(outcome[0] == "CommError");
  CHECK(outcome[1] == "CommError");
}
