// The rotary position table Kernels::rope_forward reads, for the blocks that rotate q and k.
#pragma once

#include "device/device_memory.hpp"

namespace holmes::model {

// (max_T, HS) fp32 in `mem`: row t holds cos(t theta^(-2i/HS)) for i < HS/2, then the sines.
// Angles in double, rounded once to fp32 (Hugging Face computes them in fp32; the difference
// is below bf16's resolution, docs/model.md). HS even.
device::DeviceArray<float> make_rope_table(device::DeviceMemory& mem, int max_T, int HS, double theta);

}  // namespace holmes::model
