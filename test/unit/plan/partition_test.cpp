#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <random>

#include "engine/plan/partition.hpp"

namespace hp = holmes::plan;

namespace {

// Smallest possible max-cost over every composition of `layers` into `stages` parts >= 1.
double brute_min_max(int layers, int stages, const std::function<double(int, int)>& cost, std::vector<int>& n,
                     int s = 0) {
  if (s == stages - 1) {
    n[s] = layers;
    double worst = 0;
    for (int i = 0; i < stages; ++i) worst = std::max(worst, cost(i, n[i]));
    return worst;
  }
  double best = 1e300;
  for (int k = 1; k <= layers - (stages - s - 1); ++k) {
    n[s] = k;
    best = std::min(best, brute_min_max(layers - k, stages, cost, n, s + 1));
  }
  return best;
}

}  // namespace

TEST_CASE("balanced partition reaches the brute-force optimum", "[partition]") {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0.1, 3.0);
  for (int iter = 0; iter < 200; ++iter) {
    int stages = 1 + iter % 5;
    int layers = stages + static_cast<int>(rng() % 9);
    // Affine per-stage costs plus a hinge (the exposed sync that starts once the stage
    // outgrows what backward hides): nondecreasing in n.
    std::vector<double> a(stages), b(stages), c(stages), k(stages);
    for (int s = 0; s < stages; ++s) a[s] = u(rng), b[s] = u(rng), c[s] = u(rng), k[s] = u(rng) * 3;
    auto cost = [&](int s, int n) { return a[s] + b[s] * n + c[s] * std::max(0.0, n - k[s]); };
    auto got = hp::balanced_partition(layers, stages, cost);
    REQUIRE(static_cast<int>(got.size()) == stages);
    int sum = 0;
    double worst = 0;
    for (int s = 0; s < stages; ++s) {
      REQUIRE(got[s] >= 1);
      sum += got[s];
      worst = std::max(worst, cost(s, got[s]));
    }
    REQUIRE(sum == layers);
    std::vector<int> scratch(stages);
    REQUIRE(worst == Approx(brute_min_max(layers, stages, cost, scratch)));
  }
}

TEST_CASE("uniform partition: even split, earlier stages take the remainder", "[partition]") {
  CHECK(hp::uniform_partition(36, 4) == std::vector<int>{9, 9, 9, 9});
  CHECK(hp::uniform_partition(10, 4) == std::vector<int>{3, 3, 2, 2});
  CHECK(hp::uniform_partition(5, 5) == std::vector<int>{1, 1, 1, 1, 1});
}
