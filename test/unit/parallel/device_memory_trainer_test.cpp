// The trainer on a device backend, checked on the CPU with host memory that claims to be device
// memory: through host groups (every device buffer staged through pinned memory) and through
// device groups (as NCCL groups: device buffers only, on the compute and side queues), it must
// give the very numbers of the CPU's, step for step.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "test/support/dist_test_util.hpp"

using namespace holmes;
using namespace holmes::parallel;
using namespace holmes::test;

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
          "[parallel][staged]") {
  for (const RankRun& r : check_device_run_matches_cpu(false)) CHECK(r.device_calls == 0);
}

TEST_CASE("Trainer with device groups (as NCCL) tp=2 x pp=2 x dp=2 gives the CPU's numbers, DP on the side queue",
          "[parallel][staged]") {
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
