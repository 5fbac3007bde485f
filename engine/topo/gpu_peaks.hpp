// Peak dense BF16 tensor TFLOP/s of GPU models the planner is likely to meet, so a node
// discovered at run time gets a compute figure without the user typing it. Vendor data
// sheet numbers (dense, not the 2:4 sparse figure).
#pragma once

#include <string>

namespace holmes::topo {

// By the CUDA device name ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB", ...); 0 when
// the model is not in the table.
double known_peak_tflops(const std::string& gpu_name);
// The same model's dense FP32 peak without tensor cores (TF32 off): what an fp32 job's
// matmuls run at (docs/cuda.md: the fp32 path is exact fp32). 0 when not in the table.
double known_fp32_peak_tflops(const std::string& gpu_name);
// Whether the model is a PCIe card with no NVLink of its own (L40S, L4, A10, RTX, T4, ...): its
// usual intra-node class is pcie. SXM boards and unknown models: false.
bool known_pcie_only(const std::string& gpu_name);
// The model's NVLink rate per GPU and direction in Gb/s (H100 and H200: 450 GB/s, A100: 300,
// B200: 900); 0 when not in the table.
double known_nvlink_gbps(const std::string& gpu_name);

}  // namespace holmes::topo
