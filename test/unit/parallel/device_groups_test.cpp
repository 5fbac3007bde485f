// Whether a rank of a CUDA job uses NCCL groups for device buffers (engine/parallel/device_groups).
#include <catch2/catch.hpp>

#include "common/errors.hpp"
#include "engine/parallel/device_groups.hpp"

using namespace holmes;
using namespace holmes::parallel;
using namespace holmes::runtime;

TEST_CASE("choose_nccl: NCCL for CUDA jobs with libnccl and a GPU per rank, else why not", "[train][nccl]") {
  const EnvMap none;
  const EnvMap on = {{"HOLMES_NCCL", "1"}};
  SECTION("a CPU job has no NCCL groups and nothing to say") {
    const NcclChoice c = choose_nccl(none, false, "", 2, 0);
    CHECK_FALSE(c.use);
    CHECK(c.why.empty());
  }
  SECTION("opt-in for now: unset HOLMES_NCCL stages through Gloo, saying how to turn it on") {
    const NcclChoice c = choose_nccl(none, true, "", 4, 8);
    CHECK_FALSE(c.use);
    CHECK(c.by_default);
    CHECK_THAT(c.why, Catch::Contains("HOLMES_NCCL=1"));
  }
  SECTION("HOLMES_NCCL=1, CUDA, libnccl, one GPU per rank") {
    const NcclChoice c = choose_nccl(on, true, "", 4, 8);
    CHECK(c.use);
    CHECK(c.required);
    CHECK_FALSE(c.shared_gpu);
  }
  SECTION("no libnccl with HOLMES_NCCL=1: an error naming the variable and the reason") {
    CHECK_THROWS_WITH(choose_nccl({{"HOLMES_NCCL", "1"}}, true, "libnccl.so.2: missing", 2, 2),
                      Catch::Contains("HOLMES_NCCL=1") && Catch::Contains("libnccl.so.2: missing"));
  }
  SECTION("ranks sharing a GPU: refused unless HOLMES_NCCL_SHARED_GPU=1") {
    CHECK_THROWS_WITH(choose_nccl(on, true, "", 4, 1),
                      Catch::Contains("4 processes share 1 GPU") && Catch::Contains("HOLMES_NCCL_SHARED_GPU=1"));
    const NcclChoice s = choose_nccl({{"HOLMES_NCCL", "1"}, {"HOLMES_NCCL_SHARED_GPU", "1"}}, true, "", 4, 1);
    CHECK(s.use);
    CHECK(s.shared_gpu);
  }
  SECTION("HOLMES_NCCL=0 turns it off; other values are refused naming the variable") {
    const NcclChoice c = choose_nccl({{"HOLMES_NCCL", "0"}}, true, "", 2, 2);
    CHECK_FALSE(c.use);
    CHECK(c.why == "HOLMES_NCCL=0");
    CHECK_THROWS_AS(choose_nccl({{"HOLMES_NCCL", "yes"}}, true, "", 2, 2), UserError);
    CHECK_THROWS_WITH(choose_nccl({{"HOLMES_NCCL_SHARED_GPU", "2"}}, false, "", 2, 2),
                      Catch::Contains("HOLMES_NCCL_SHARED_GPU='2'") && Catch::Contains("accepted: 0 or unset, 1"));
  }
}
