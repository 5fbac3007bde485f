// Comparisons the tests share.
#pragma once

#include <algorithm>
#include <cmath>

namespace holmes::test {

// |a - b| relative to |b| (b the reference; a floor keeps b = 0 finite).
inline double rel(double a, double b) { return std::fabs(a - b) / std::max(1e-12, std::fabs(b)); }

}  // namespace holmes::test
