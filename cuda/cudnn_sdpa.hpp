// cuDNN 9 fused causal attention (flash forward and backward, bf16 in and out, fp32 softmax
// statistics) built with cuDNN's backend graph API (cudnn_graph.h), the attention.hpp
// method "cudnn". Q (NH heads), K and V (KVH heads each; grouped-query attention when KVH <
// NH) are read in place from the qkv buffer through strides (attention_plan.hpp: qkv_view),
// out and dout are (B,T,C), dqkv is written like qkv.
//
// The graphs are the composite form cuDNN's fused-attention engines recognise:
//   forward:  S = Q K^T * scale, causal mask (row index >= column index, else the lowest
//             float), softmax with statistics (max, x - max, exp, sum, stats = max + log sum,
//             exp / sum), O = P V.
//   backward: D = rowsum(dO * O) (kept in the workspace), P = exp(S - stats) recomputed
//             with the same mask, dV = P^T dO, dS = P * (dO V^T - D) * scale, dK = dS^T Q,
//             dQ = dS K written directly (no fp32 dQ accumulator: the engine then uses its
//             deterministic dP-workspace algorithm). Three equivalent forms of it are tried
//             in order (kBackwardForms below). With KVH < NH the forward's products read K
//             and V with KVH heads (cuDNN broadcasts each over its group), and dK, dV are
//             per-query-head products summed over each group by a reduction.
// Document masking (data.document_mask) extends the causal mask to "same document and causal"
// (SdpaMask below) in the same graphs; everything else is unchanged.
// Graphs and execution plans are built once per (B, T, C, NH, KVH, direction, mask) and cached; among
// the heuristic's engine configurations (mode A) the first that finalizes and carries no
// nondeterministic numerical note is used. The workspace is owned here and grows as needed.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>

namespace holmes::cuda {

class CudnnGraphBuilder;

// The mask of a graph. kCausal: key j <= query t. The document masks keep keys
// t - pos[b,t] .. t (pos (B,T) int32: each token's position in its document), in two forms,
// because which one a cuDNN release's fused engines take is only known on the GPU:
//   kDocumentBound: pos bound as an int32 tensor [B,1,T,1]; the graph computes the lower bound
//                   row - pos and keeps (row >= col) and (col >= row - pos); no other memory;
//   kDocumentBias:  an additive bf16 bias [B,1,T,T] (0 in the document's block, the lowest
//                   bf16 elsewhere; document_bias in attention_bias.hpp builds it from pos)
//                   added to the scaled scores before the causal mask, the bias input cuDNN's
//                   fused attention has in both directions.
enum class SdpaMask { kCausal, kDocumentBound, kDocumentBias };
const char* sdpa_mask_name(SdpaMask m);  // "causal", "document bound", "document bias"
// The uid of the mask's bound input (pos or the bias), bound last in both directions.
constexpr std::int64_t kSdpaMaskUid = 20;

// The backward graph exists in kBackwardForms equivalent forms (cudnn_sdpa.cpp: the causal
// mask before or after subtracting the statistics, D in the workspace or virtual), because
// cuDNN releases recognise different ones; they are tried in order. The forward has one.
constexpr int kBackwardForms = 3;

// Adds every tensor and operation of one direction's graph (in form `form`) to `g`, each
// finalized on its own; needs cuDNN loaded but no GPU (the operation graph, which needs a
// handle, is not built). Throws CudaError naming the call when cuDNN refuses a descriptor.
void build_sdpa_graph(CudnnGraphBuilder& g, bool backward, int B, int T, int C, int NH, int KVH,
                      int form = 0, SdpaMask mask = SdpaMask::kCausal);

// Builds one direction's graph (form `form`) for the GPU described by `device_json` (the JSON
// of a CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR) without a GPU: the operation graph is finalized
// (cuDNN checks the whole DAG) and the heuristics are asked for engines. Returns "" when a
// plan finalized, else why not; `proposed` gets the number of configurations the heuristics
// proposed. Without a driver, plans of runtime-compiled engines cannot finalize, so a
// GPU-free caller can only learn that the graph is well formed and which engines match it.
// Needs cuDNN >= 9.8; throws CudaError naming the call when a descriptor is refused.
std::string check_sdpa_offline(const std::string& device_json, bool backward, int B, int T, int C,
                               int NH, int KVH, int form, std::int64_t* proposed,
                               SdpaMask mask = SdpaMask::kCausal);

class CudnnSdpa {
 public:
  CudnnSdpa();  // needs no GPU and does not load cuDNN
  ~CudnnSdpa();
  CudnnSdpa(const CudnnSdpa&) = delete;
  CudnnSdpa& operator=(const CudnnSdpa&) = delete;

  // Builds (or finds) the graph of one direction for this shape: "" when cuDNN has an engine
  // for it, else why not (cuDNN missing, a status, no engine). Never throws for those.
  std::string prepare(bool backward, int B, int T, int C, int NH, int KVH,
                      SdpaMask mask = SdpaMask::kCausal);

  // bf16 device pointers (__nv_bfloat16); stats (B,NH,T) fp32. Enqueued on `stream`. Throw
  // CudaError when the graph cannot be built or cuDNN fails. mask_input: null for kCausal,
  // pos (B,T) int32 for kDocumentBound, the bias (B,1,T,T) bf16 for kDocumentBias (device
  // memory; std::invalid_argument when it is missing or given for kCausal).
  void forward(void* out, float* stats, const void* qkv, int B, int T, int C, int NH, int KVH,
               cudaStream_t stream, SdpaMask mask = SdpaMask::kCausal, const void* mask_input = nullptr);
  void backward(void* dqkv, const void* dout, const void* qkv, const void* out,
                const float* stats, int B, int T, int C, int NH, int KVH, cudaStream_t stream,
                SdpaMask mask = SdpaMask::kCausal, const void* mask_input = nullptr);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace holmes::cuda
