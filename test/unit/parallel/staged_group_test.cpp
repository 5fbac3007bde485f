// StagedGroup: host-memory groups (Gloo, in-process) carrying device buffers through host
// copies, checked on the CPU with host memory that claims to be device memory. A device
// backend's trainer must give the very numbers of the CPU's, step for step.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "engine/parallel/staged_group.hpp"
#include "test/support/dist_test_util.hpp"

using namespace holmes;
using namespace holmes::parallel;
using namespace holmes::test;

TEST_CASE("StagedGroup stages device buffers and passes host buffers through", "[train][dist][staged]") {
  comm::test::Job job(comm::test::Impl::kInProcess, 2);
  run_threads(2, [&](int rank) {
    auto inner = job.group(nullptr, "staged", {0, 1}, rank, std::chrono::seconds(10));
    HostAsDevice mem;
    StagedGroup g(*inner, mem);
    CHECK(g.size() == 2);
    CHECK(g.rank() == rank);
    CHECK(g.transport().find("staged through host memory") != std::string::npos);
    // A device buffer: staged.
    device::DeviceArray<float> dev(mem, 5);
    std::vector<float> v = {1.f + rank, 2, 3, 4, 5.f * rank};
    dev.upload(v);
    g.all_reduce({dev.data(), 5}, comm::ReduceOp::kSum);
    std::vector<float> got(5);
    dev.download(got);
    CHECK(got == std::vector<float>{3, 4, 6, 8, 5});
    CHECK(g.staged_ops() == 1);
    // A host buffer (the trainer's sums): passed straight through.
    std::vector<float> host = {float(rank), 1};
    g.all_reduce(host, comm::ReduceOp::kMax);
    CHECK(host == std::vector<float>{1, 1});
    CHECK(g.staged_ops() == 1);
    // reduce_scatter and all_gather from and into device memory.
    device::DeviceArray<float> in(mem, 4), out(mem, 2), all(mem, 4);
    in.upload(std::vector<float>{1, 2, 3, 4});
    g.reduce_scatter({out.data(), 2}, {in.data(), 4}, comm::ReduceOp::kSum);
    std::vector<float> part(2);
    out.download(part);
    CHECK(part == (rank == 0 ? std::vector<float>{2, 4} : std::vector<float>{6, 8}));
    g.all_gather({all.data(), 4}, {out.data(), 2});
    all.download(got = std::vector<float>(4));
    CHECK(got == std::vector<float>{2, 4, 6, 8});
    // Paired send/recv between device buffers.
    device::DeviceArray<float> send(mem, 3), recv(mem, 3);
    send.upload(std::vector<float>{10.f * rank, 1, 2});
    const comm::P2POp ops[] = {{comm::P2POp::kSend, {send.data(), 3}, 1 - rank, 7},
                               {comm::P2POp::kRecv, {recv.data(), 3}, 1 - rank, 7}};
    g.send_recv(ops);
    recv.download(got = std::vector<float>(3));
    CHECK(got == std::vector<float>{10.f * (1 - rank), 1, 2});
    CHECK(g.staged_ops() == 4);
  });
}

namespace {

// tp2 x pp2 x dp2 on the CPU, then on host memory that claims to be device memory (with device
// groups when asked): every step's loss and norm, the evaluation and the weights bit for bit.
std::vector<RankRun> check_device_run_matches_cpu(bool device_groups) {
  const spec::JobSpec spec = tiny_job();
  Grid g{.tp = 2, .pp = 2, .dp = 2, .bucket_floats = 3000};
  const std::vector<RankRun> cpu = run_grid(spec, g);
  g.device_memory = true;
  g.device_groups = device_groups;
  const std::vector<RankRun> dev = run_grid(spec, g);
  REQUIRE(dev.size() == cpu.size());
  for (size_t r = 0; r < cpu.size(); ++r) {
    INFO("rank " << r);
    REQUIRE(dev[r].steps.size() == cpu[r].steps.size());
    for (size_t s = 0; s < cpu[r].steps.size(); ++s) {
      CHECK(dev[r].steps[s].loss == cpu[r].steps[s].loss);
      CHECK(dev[r].steps[s].grad_norm == cpu[r].steps[s].grad_norm);
    }
    CHECK(dev[r].eval == cpu[r].eval);
    CHECK(dev[r].params == cpu[r].params);
    CHECK(dev[r].overlapped == cpu[r].overlapped);  // buckets still go out during backward
  }
  return dev;
}

}  // namespace

TEST_CASE("Trainer on device memory (host-staged groups) tp=2 x pp=2 x dp=2 gives the CPU's numbers bit for bit",
          "[train][dist][staged]") {
  for (const RankRun& r : check_device_run_matches_cpu(false)) CHECK(r.device_calls == 0);
}

TEST_CASE("StagedGroup with a device group sends device buffers there, with the backend's stream", "[train][dist][staged]") {
  comm::test::Job job(comm::test::Impl::kInProcess, 2);
  run_threads(2, [&](int rank) {
    HostAsDevice mem;
    auto host = job.group(nullptr, "host", {0, 1}, rank, std::chrono::seconds(10));
    DeviceOnlyGroup device(job.group(nullptr, "device", {0, 1}, rank, std::chrono::seconds(10)), mem);
    int stream_tag = 0;
    StagedGroup g(*host, mem, &device, &stream_tag);
    CHECK(g.transport().find("device-only") == 0);
    device::DeviceArray<float> dev(mem, 3);
    dev.upload(std::vector<float>{1.f + rank, 2, 3});
    g.all_reduce({dev.data(), 3}, comm::ReduceOp::kSum);  // device: to the device group
    std::vector<float> got(3);
    dev.download(got);
    CHECK(got == std::vector<float>{3, 4, 6});
    std::vector<float> sums = {float(rank), 1};
    g.all_reduce(sums, comm::ReduceOp::kSum);  // host: to the host group (DeviceOnlyGroup would throw)
    CHECK(sums == std::vector<float>{1, 2});
    device::DeviceArray<float> send(mem, 2), recv(mem, 2);
    send.upload(std::vector<float>{5.f * rank, 7});
    const comm::P2POp ops[] = {{comm::P2POp::kSend, {send.data(), 2}, 1 - rank, 3},
                               {comm::P2POp::kRecv, {recv.data(), 2}, 1 - rank, 3}};
    g.send_recv(ops);
    recv.download(got = std::vector<float>(2));
    CHECK(got == std::vector<float>{5.f * (1 - rank), 7});
    CHECK(device.calls() == 3);  // all_reduce + the two halves of send_recv
    CHECK(device.last_stream() == &stream_tag);  // the backend's queue when the caller names none
    CHECK(g.device_ops() == 2);
    CHECK(g.staged_ops() == 0);
  });
}

TEST_CASE("Trainer with device groups (as NCCL) tp=2 x pp=2 x dp=2 gives the CPU's numbers, DP on the side queue",
          "[train][dist][staged]") {
  // tp, pp and dp traffic on device buffers went to the device groups; the DP reduce-scatters
  // on the side queue (ordered after the gradients and before their use), the rest on the
  // compute queue
  for (const RankRun& r : check_device_run_matches_cpu(true)) {
    CHECK(r.device_calls > 0);
    CHECK(r.queue_problems.empty());
    CHECK(r.queue_orders > 0);
    CHECK(r.device_spans > 0);  // the compute queue's communication timed by the device
  }
}
