// Layers per pipeline stage. `auto` balances the stages' cost (min over partitions of the
// max over stages of F_s(n_s), F_s nondecreasing in n), which the planner then refines against
// its coupled step (cost_model.hpp coupled_partition); `uniform` splits evenly (earlier stages
// take the remainder, the last one carries the LM head); `list` is taken as given.
#pragma once

#include <functional>
#include <vector>

namespace holmes::plan {

// F(stage, layers) -> cost; must be nondecreasing in layers. Every stage gets >= min_layers
// layers (interleaved: one per model chunk). Greedy: each next layer goes to the stage whose
// cost after taking it is lowest (ties: the stage with the smaller marginal cost, then the
// lower index). For nondecreasing costs this minimises the maximum. O(L log p). Needs
// 1 <= stages x min_layers <= layers.
std::vector<int> balanced_partition(int layers, int stages, const std::function<double(int, int)>& cost,
                                    int min_layers = 1);
std::vector<int> uniform_partition(int layers, int stages);

}  // namespace holmes::plan
