// Helpers for the model tests: seeded random tensors and a finite-difference check of one
// op's backward against its forward.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace holmes::model::test {

inline std::vector<float> random_vec(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

// Scalar probe L = sum_i w_i * out_i, accumulated in double so the finite difference is not
// drowned by the fp32 round-off of the sum.
inline double probe(const std::vector<float>& out, const std::vector<float>& w) {
  double s = 0.0;
  for (size_t i = 0; i < out.size(); ++i) s += static_cast<double>(out[i]) * w[i];
  return s;
}

// Compares analytic[i] with the central difference of loss() in x[i] for every i (or a
// strided subset when x is large). Passes when |num - ana| <= atol + rtol * max(|num|, |ana|).
inline void check_gradient(const std::string& what, std::vector<float>& x,
                           const std::vector<float>& analytic, const std::function<double()>& loss,
                           float eps = 1e-2f, double atol = 1e-3, double rtol = 2e-2,
                           size_t max_checks = 200) {
  REQUIRE(x.size() == analytic.size());
  const size_t stride = x.size() > max_checks ? x.size() / max_checks + 1 : 1;
  int bad = 0;
  for (size_t i = 0; i < x.size(); i += stride) {
    const float saved = x[i];
    x[i] = saved + eps;
    const double up = loss();
    x[i] = saved - eps;
    const double down = loss();
    x[i] = saved;
    const double num = (up - down) / (2.0 * eps);
    const double ana = analytic[i];
    if (std::fabs(num - ana) > atol + rtol * std::max(std::fabs(num), std::fabs(ana))) {
      if (++bad <= 5) UNSCOPED_INFO(what << "[" << i << "]: numeric " << num << " analytic " << ana);
    }
  }
  CHECK(bad == 0);
}

}  // namespace holmes::model::test
