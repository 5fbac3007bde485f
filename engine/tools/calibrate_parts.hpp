// Pieces of `holmes-train calibrate` shared by its files. Internal to engine/tools.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>
#include <string>

#include "engine/tools/calibrate_compute.hpp"
#include "model/backend.hpp"
#include "model/gpt_config.hpp"

namespace holmes::tools {

// The least of `reps` timed runs of op (each ended on the device), after one untimed run: what
// else runs on the machine only adds to a run, and a layer's time is a difference of two.
template <class Op>
double least_ms(device::DeviceMemory& mem, int reps, Op&& op) {
  op();
  mem.synchronize();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    op();
    mem.synchronize();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return *std::min_element(t.begin(), t.end());
}

// The table's kernel rows: each GEMM of a block and the head at every slice and micro-batch of
// the sweep (forward, input and weight gradients), attention, the optimizer's update, memory
// copies and, on a GPU, host copies and one kernel's launch.
void measure_kernels(const model::GptConfig& global, model::Backend& backend, DType precision,
                     const ComputeSweep& sweep, int seq_len, topo::ComputeTable& table,
                     const std::function<void(const std::string&)>& say);

}  // namespace holmes::tools
