// A thin layer over cuDNN's backend descriptors (cudnn_graph.h) for building operation graphs:
// an owning descriptor, a graph builder that keeps every descriptor it makes alive, engine
// selection through the heuristics, and execution through a variant pack. Used by
// cudnn_sdpa.cpp. Every cuDNN call is checked; errors name the call and the attribute.
#pragma once

#include <cudnn_graph.h>

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace holmes::cuda {

// One backend descriptor, destroyed with its owner. Move-only.
class CudnnDesc {
 public:
  explicit CudnnDesc(cudnnBackendDescriptorType_t type);
  ~CudnnDesc();
  CudnnDesc(CudnnDesc&& o) noexcept : d_(std::exchange(o.d_, nullptr)) {}
  CudnnDesc& operator=(CudnnDesc&& o) noexcept;
  CudnnDesc(const CudnnDesc&) = delete;
  CudnnDesc& operator=(const CudnnDesc&) = delete;

  cudnnBackendDescriptor_t get() const { return d_; }
  void set(cudnnBackendAttributeName_t attr, cudnnBackendAttributeType_t type, std::int64_t count,
           const void* values);
  void set_desc(cudnnBackendAttributeName_t attr, cudnnBackendDescriptor_t value) {
    set(attr, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &value);
  }
  void finalize(const char* what);

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

using Dims4 = std::array<std::int64_t, 4>;

// What a CudnnGraphBuilder handed to cuDNN, kept so host tests can evaluate a graph's meaning
// without cuDNN's engines (attention_graph_test.cpp). Tensors by uid; operations in order.
struct GraphTensorInfo {
  std::int64_t uid = 0;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  Dims4 dims{}, strides{};
  bool is_virtual = false, by_value = false;
};
struct GraphOpInfo {
  enum Kind { kPointwise, kReduction, kMatmul, kReshape } kind = kPointwise;
  int mode = 0;                  // cudnnPointwiseMode_t or cudnnReduceTensorOp_t
  std::int64_t axis = -1;        // GEN_INDEX
  std::vector<std::int64_t> in;  // uids: pointwise x, b, t (as given); matmul a, b; else x
  std::int64_t out = 0;
};

// Builds one operation graph. Tensors are referred to by their raw descriptor; the builder
// owns them and the operations.
class CudnnGraphBuilder {
 public:
  // A tensor the caller binds to memory by `uid` at execution.
  cudnnBackendDescriptor_t tensor(std::int64_t uid, cudnnDataType_t type, const Dims4& dims,
                                  const Dims4& strides);
  // A scalar passed by value (host pointer in the variant pack), dims [1,1,1,1].
  cudnnBackendDescriptor_t scalar(std::int64_t uid, cudnnDataType_t type);
  // An intermediate the engine keeps to itself.
  cudnnBackendDescriptor_t virtual_tensor(cudnnDataType_t type, const Dims4& dims,
                                          const Dims4& strides);

  // y = mode(x, b) (b may be null for unary modes); t is the third input (BINARY_SELECT's
  // condition); axis >= 0 for GEN_INDEX. `math` is the compute precision.
  void pointwise(cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
                 cudnnBackendDescriptor_t y, cudnnDataType_t math = CUDNN_DATA_FLOAT,
                 cudnnBackendDescriptor_t t = nullptr, std::int64_t axis = -1);
  void reduction(cudnnReduceTensorOp_t op, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y);
  // c = a b over the last two dimensions, fp32 accumulation.
  void matmul(cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c);
  void reshape(cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y);

  // The finalized operation graph of everything added, for `handle` (nullptr: no handle, for
  // building against a device description, see select_engine).
  CudnnDesc finish(cudnnHandle_t handle);
  std::vector<CudnnDesc>& owned() { return owned_; }
  std::size_t operation_count() const { return ops_.size(); }
  // The uids of the tensors (and by-value scalars) bound at execution, in creation order.
  const std::vector<std::int64_t>& bound_uids() const { return bound_uids_; }
  const std::vector<GraphTensorInfo>& tensor_infos() const { return tensor_infos_; }
  const std::vector<GraphOpInfo>& op_infos() const { return op_infos_; }

 private:
  cudnnBackendDescriptor_t make_tensor(std::int64_t uid, cudnnDataType_t type, const Dims4& dims,
                                       const Dims4& strides, bool is_virtual, bool by_value);
  // Adds `op` to the graph, keeping it and its operator descriptor `inner` alive.
  void keep_operation(CudnnDesc op, CudnnDesc inner);
  void record(GraphOpInfo::Kind kind, int mode, std::int64_t axis,
              std::initializer_list<cudnnBackendDescriptor_t> in, cudnnBackendDescriptor_t out);

  std::int64_t next_virtual_uid_ = 1000000;
  std::vector<std::int64_t> bound_uids_;
  std::vector<CudnnDesc> owned_;                 // tensors and operator descriptors
  std::vector<cudnnBackendDescriptor_t> ops_;    // operations, in order (also in owned_)
  std::vector<GraphTensorInfo> tensor_infos_;
  std::vector<GraphOpInfo> op_infos_;
};

// A finalized execution plan for one graph, with everything it references kept alive.
struct CudnnPlan {
  std::vector<CudnnDesc> keep;  // tensors, operations, graph, engine configuration
  CudnnDesc plan{CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR};
  std::int64_t workspace_bytes = 0;
  std::vector<std::int64_t> bound_uids;  // what the variant pack must bind
  std::int64_t proposed = 0;  // configurations the heuristics proposed (set even on failure)
};

// Asks the heuristics (mode A) for engine configurations of `graph` and finalizes the first
// deterministic one into `out.plan`. Returns "" or why none was usable (no configuration, or
// each one's failure). Does not throw for cuDNN statuses of unsupported configurations.
// With `device_prop` (a finalized CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, cuDNN >= 9.8) instead of
// a handle, engines are chosen and plans finalized for that device description without a GPU
// (such a plan is for checking support, not for execution).
std::string select_engine(cudnnHandle_t handle, CudnnDesc& graph, CudnnPlan& out,
                          cudnnBackendDescriptor_t device_prop = nullptr);

// Runs `plan` on `handle`'s stream with the (uid, pointer) bindings and the workspace. Binds
// exactly plan.bound_uids (other bindings are ignored: a graph form may not use them); throws
// std::logic_error naming a uid the plan needs and `bindings` lacks.
void execute_plan(cudnnHandle_t handle, const CudnnPlan& plan,
                  const std::vector<std::pair<std::int64_t, void*>>& bindings, void* workspace);

}  // namespace holmes::cuda
