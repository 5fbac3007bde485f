#include "model/rope_table.hpp"

#include <cmath>
#include <vector>

namespace holmes::model {

device::DeviceArray<float> make_rope_table(device::DeviceMemory& mem, int max_T, int HS, double theta) {
  const int half = HS / 2;
  std::vector<float> host(static_cast<size_t>(max_T) * HS);
  for (int t = 0; t < max_T; ++t)
    for (int i = 0; i < half; ++i) {
      const double inv_freq = std::pow(theta, -2.0 * i / HS);
      const double angle = t * inv_freq;
      host[static_cast<size_t>(t) * HS + i] = static_cast<float>(std::cos(angle));
      host[static_cast<size_t>(t) * HS + half + i] = static_cast<float>(std::sin(angle));
    }
  device::DeviceArray<float> table(mem, host.size());
  table.upload(host);
  return table;
}

}  // namespace holmes::model
