#include "engine/plan/partition.hpp"

#include <queue>
#include <tuple>

namespace holmes::plan {

std::vector<int> balanced_partition(int layers, int stages, const std::function<double(int, int)>& cost,
                                    int min_layers) {
  std::vector<int> n(stages, min_layers);
  // (cost after one more layer, marginal cost, stage): smallest first.
  using Entry = std::tuple<double, double, int>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  auto push = [&](int s) {
    double next = cost(s, n[s] + 1);
    heap.emplace(next, next - cost(s, n[s]), s);
  };
  for (int s = 0; s < stages; ++s) push(s);
  for (int left = layers - stages * min_layers; left > 0; --left) {
    int s = std::get<2>(heap.top());
    heap.pop();
    ++n[s];
    push(s);
  }
  return n;
}

std::vector<int> uniform_partition(int layers, int stages) {
  std::vector<int> n(stages, layers / stages);
  for (int s = 0; s < layers % stages; ++s) ++n[s];
  return n;
}

}  // namespace holmes::plan
