// Catch2 checks that two runs of run_grid (dist_test_util.hpp) agree bit for bit on every
// rank: each step's loss and gradient norm, the validation loss and the final weights. For
// features that must not change the arithmetic (recomputation, pipeline schedules).
#pragma once

#include <catch2/catch.hpp>

#include <vector>

#include "test/support/dist_test_util.hpp"

namespace holmes::test {

inline void check_same_runs(const std::vector<RankRun>& got, const std::vector<RankRun>& ref) {
  REQUIRE(got.size() == ref.size());
  for (size_t r = 0; r < ref.size(); ++r) {
    INFO("rank " << r);
    REQUIRE(got[r].steps.size() == ref[r].steps.size());
    for (size_t s = 0; s < ref[r].steps.size(); ++s) {
      INFO("step " << s);
      CHECK(got[r].steps[s].loss == ref[r].steps[s].loss);
      CHECK(got[r].steps[s].grad_norm == ref[r].steps[s].grad_norm);
    }
    CHECK(got[r].eval == ref[r].eval);
    CHECK(got[r].params == ref[r].params);
  }
}

}  // namespace holmes::test
