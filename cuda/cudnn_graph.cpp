#include "cuda/cudnn_graph.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "cuda/check.hpp"
#include "cuda/cudnn_api.hpp"

namespace holmes::cuda {

namespace {

// cudnn_graph.h marks the handle attributes deprecated (cuDNN 10 drops them); cuDNN 9 still
// needs them on the operation graph and the execution plan. Named by value to avoid the warning.
constexpr auto kGraphHandleAttr = static_cast<cudnnBackendAttributeName_t>(800);
constexpr auto kPlanHandleAttr = static_cast<cudnnBackendAttributeName_t>(400);

void check_call(cudnnStatus_t status, const std::string& call) {
  check_cudnn(status, call.c_str(), __FILE__, __LINE__);
}

}  // namespace

CudnnDesc::CudnnDesc(cudnnBackendDescriptorType_t type) {
  check_call(cudnn().create_descriptor(type, &d_),
             fmt::format("cudnnBackendCreateDescriptor(type {})", int(type)));
}

CudnnDesc::~CudnnDesc() {
  if (d_) cudnn().destroy_descriptor(d_);
}

CudnnDesc& CudnnDesc::operator=(CudnnDesc&& o) noexcept {
  if (this != &o) {
    if (d_) cudnn().destroy_descriptor(d_);
    d_ = std::exchange(o.d_, nullptr);
  }
  return *this;
}

void CudnnDesc::set(cudnnBackendAttributeName_t attr, cudnnBackendAttributeType_t type,
                    std::int64_t count, const void* values) {
  check_call(cudnn().set_attribute(d_, attr, type, count, values),
             fmt::format("cudnnBackendSetAttribute(attribute {}, type {})", int(attr), int(type)));
}

void CudnnDesc::finalize(const char* what) {
  check_call(cudnn().finalize(d_), fmt::format("cudnnBackendFinalize({})", what));
}

cudnnBackendDescriptor_t CudnnGraphBuilder::make_tensor(std::int64_t uid, cudnnDataType_t type,
                                                        const Dims4& dims, const Dims4& strides,
                                                        bool is_virtual, bool by_value) {
  CudnnDesc t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  const std::int64_t alignment = 16;
  t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
  t.set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data());
  t.set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data());
  t.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
  t.set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment);
  if (is_virtual) t.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
  if (by_value) t.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value);
  t.finalize(fmt::format("tensor uid {}", uid).c_str());
  tensor_infos_.push_back({uid, type, dims, strides, is_virtual, by_value});
  owned_.push_back(std::move(t));
  return owned_.back().get();
}

cudnnBackendDescriptor_t CudnnGraphBuilder::tensor(std::int64_t uid, cudnnDataType_t type,
                                                   const Dims4& dims, const Dims4& strides) {
  bound_uids_.push_back(uid);
  return make_tensor(uid, type, dims, strides, false, false);
}

cudnnBackendDescriptor_t CudnnGraphBuilder::scalar(std::int64_t uid, cudnnDataType_t type) {
  bound_uids_.push_back(uid);
  return make_tensor(uid, type, {1, 1, 1, 1}, {1, 1, 1, 1}, false, true);
}

cudnnBackendDescriptor_t CudnnGraphBuilder::virtual_tensor(cudnnDataType_t type, const Dims4& dims,
                                                           const Dims4& strides) {
  return make_tensor(next_virtual_uid_++, type, dims, strides, true, false);
}

void CudnnGraphBuilder::pointwise(cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x,
                                  cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t y,
                                  cudnnDataType_t math, cudnnBackendDescriptor_t t,
                                  std::int64_t axis) {
  CudnnDesc pw(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
  pw.set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &math);
  if (axis >= 0) pw.set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
  pw.finalize(fmt::format("pointwise mode {}", int(mode)).c_str());
  CudnnDesc op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw.get());
  op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
  if (b) op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b);
  if (t) op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, t);
  op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
  op.finalize(fmt::format("pointwise operation mode {}", int(mode)).c_str());
  keep_operation(std::move(op), std::move(pw));
  record(GraphOpInfo::kPointwise, mode, axis, {x, b, t}, y);
}

void CudnnGraphBuilder::reduction(cudnnReduceTensorOp_t reduce, cudnnBackendDescriptor_t x,
                                  cudnnBackendDescriptor_t y) {
  CudnnDesc red(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
  const cudnnDataType_t math = CUDNN_DATA_FLOAT;
  red.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &reduce);
  red.set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &math);
  red.finalize("reduction");
  CudnnDesc op(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
  op.set_desc(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x);
  op.set_desc(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y);
  op.set_desc(CUDNN_ATTR_OPERATION_REDUCTION_DESC, red.get());
  op.finalize("reduction operation");
  keep_operation(std::move(op), std::move(red));
  record(GraphOpInfo::kReduction, reduce, -1, {x}, y);
}

void CudnnGraphBuilder::matmul(cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b,
                               cudnnBackendDescriptor_t c) {
  CudnnDesc mm(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
  const cudnnDataType_t math = CUDNN_DATA_FLOAT;
  mm.set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &math);
  mm.finalize("matmul");
  CudnnDesc op(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
  op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_ADESC, a);
  op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_BDESC, b);
  op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_CDESC, c);
  op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_DESC, mm.get());
  op.finalize("matmul operation");
  keep_operation(std::move(op), std::move(mm));
  record(GraphOpInfo::kMatmul, 0, -1, {a, b}, c);
}

void CudnnGraphBuilder::reshape(cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
  CudnnDesc op(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
  op.set_desc(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x);
  op.set_desc(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y);
  op.finalize("reshape operation");
  ops_.push_back(op.get());
  owned_.push_back(std::move(op));
  record(GraphOpInfo::kReshape, 0, -1, {x}, y);
}

void CudnnGraphBuilder::record(GraphOpInfo::Kind kind, int mode, std::int64_t axis,
                               std::initializer_list<cudnnBackendDescriptor_t> in,
                               cudnnBackendDescriptor_t out) {
  // A tensor's uid, read back from its descriptor (-1 for an absent input).
  auto uid_of = [](cudnnBackendDescriptor_t d) -> std::int64_t {
    if (!d) return -1;
    std::int64_t uid = 0, n = 0;
    check_call(cudnn().get_attribute(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &n, &uid),
               "cudnnBackendGetAttribute(CUDNN_ATTR_TENSOR_UNIQUE_ID)");
    return uid;
  };
  GraphOpInfo op;
  op.kind = kind;
  op.mode = mode;
  op.axis = axis;
  for (cudnnBackendDescriptor_t d : in) op.in.push_back(uid_of(d));
  while (!op.in.empty() && op.in.back() < 0) op.in.pop_back();
  op.out = uid_of(out);
  op_infos_.push_back(std::move(op));
}

void CudnnGraphBuilder::keep_operation(CudnnDesc op, CudnnDesc inner) {
  owned_.push_back(std::move(inner));
  ops_.push_back(op.get());
  owned_.push_back(std::move(op));
}

CudnnDesc CudnnGraphBuilder::finish(cudnnHandle_t handle) {
  CudnnDesc graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
            static_cast<std::int64_t>(ops_.size()), ops_.data());
  if (handle) graph.set(kGraphHandleAttr, CUDNN_TYPE_HANDLE, 1, &handle);
  graph.finalize("operation graph");
  return graph;
}

namespace {

// Whether the engine of configuration `cfg` says its results may vary from run to run.
bool nondeterministic(cudnnBackendDescriptor_t cfg) {
  CudnnDesc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t raw = engine.get();
  std::int64_t n = 0;
  check_call(cudnn().get_attribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                   1, &n, &raw),
             "cudnnBackendGetAttribute(CUDNN_ATTR_ENGINECFG_ENGINE)");
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  n = 0;
  check_call(cudnn().get_attribute(raw, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                   CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, notes),
             "cudnnBackendGetAttribute(CUDNN_ATTR_ENGINE_NUMERICAL_NOTE)");
  for (std::int64_t i = 0; i < n; ++i)
    if (notes[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC) return true;
  return false;
}

}  // namespace

std::string select_engine(cudnnHandle_t handle, CudnnDesc& graph, CudnnPlan& out,
                          cudnnBackendDescriptor_t device_prop) {
  CudnnDesc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
  heur.set_desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph.get());
  heur.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
  if (device_prop) heur.set_desc(CUDNN_ATTR_ENGINEHEUR_DEVICEPROP, device_prop);
  heur.finalize("engine heuristics (mode A)");
  std::int64_t count = 0;
  check_call(cudnn().get_attribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr),
             "cudnnBackendGetAttribute(CUDNN_ATTR_ENGINEHEUR_RESULTS, count)");
  out.proposed = count;
  if (count <= 0) return "the heuristics offer no engine for this graph";
  std::vector<CudnnDesc> cfgs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (std::int64_t i = 0; i < count; ++i) {
    cfgs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    raw.push_back(cfgs.back().get());
  }
  std::int64_t got = 0;
  check_call(cudnn().get_attribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, raw.data()),
             "cudnnBackendGetAttribute(CUDNN_ATTR_ENGINEHEUR_RESULTS)");
  std::string why;
  for (std::int64_t i = 0; i < got; ++i) {
    try {
      if (nondeterministic(raw[i])) {
        why += fmt::format("{}config {}: nondeterministic", why.empty() ? "" : "; ", i);
        continue;
      }
      CudnnDesc plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      if (device_prop)
        plan.set_desc(CUDNN_ATTR_EXECUTION_PLAN_DEVICEPROP, device_prop);
      else
        plan.set(kPlanHandleAttr, CUDNN_TYPE_HANDLE, 1, &handle);
      plan.set_desc(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, raw[i]);
      plan.finalize("execution plan");
      std::int64_t n = 0, bytes = 0;
      check_call(cudnn().get_attribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                       CUDNN_TYPE_INT64, 1, &n, &bytes),
                 "cudnnBackendGetAttribute(CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE)");
      out.plan = std::move(plan);
      out.workspace_bytes = bytes;
      out.keep.push_back(std::move(cfgs[i]));
      out.keep.push_back(std::move(graph));
      return "";
    } catch (const CudaError& e) {
      why += fmt::format("{}config {}: {}", why.empty() ? "" : "; ", i, e.code_name());
    }
  }
  return fmt::format("none of the {} proposed engine configurations is supported{}{}", count,
                     got > 0 ? ": " : " (cuDNN's support checks refused all)", why);
}

void execute_plan(cudnnHandle_t handle, const CudnnPlan& plan,
                  const std::vector<std::pair<std::int64_t, void*>>& bindings, void* workspace) {
  std::vector<std::int64_t> uids;
  std::vector<void*> ptrs;
  for (std::int64_t uid : plan.bound_uids) {
    auto it = std::find_if(bindings.begin(), bindings.end(),
                           [uid](const auto& b) { return b.first == uid; });
    if (it == bindings.end())
      throw std::logic_error(fmt::format("cuDNN plan needs tensor uid {} and no pointer was given",
                                         uid));
    uids.push_back(uid);
    ptrs.push_back(it->second);
  }
  CudnnDesc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64,
           static_cast<std::int64_t>(uids.size()), uids.data());
  pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
           static_cast<std::int64_t>(ptrs.size()), ptrs.data());
  pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
  pack.finalize("variant pack");
  check_call(cudnn().execute(handle, plan.plan.get(), pack.get()), "cudnnBackendExecute");
}

}  // namespace holmes::cuda
