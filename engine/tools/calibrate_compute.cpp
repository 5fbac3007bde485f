#include "engine/tools/calibrate_compute.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <memory>

#include "common/errors.hpp"
#include "engine/parallel/trainer.hpp"
#include "engine/plan/measured.hpp"
#include "engine/plan/model_size.hpp"
#include "engine/spec/model_config.hpp"
#include "model/architecture.hpp"
#include "engine/tools/calibrate_parts.hpp"
#include "model/gpt.hpp"

namespace holmes::tools {

namespace {

// A tensor-parallel rank's view of its group with the sums left out: the shard computes its
// slice's kernels alone (the sums are the communication, measured apart through the groups).
class SliceOnly final : public model::TensorParallelComm {
 public:
  explicit SliceOnly(int size) : size_(size) {}
  int size() const override { return size_; }
  int rank() const override { return 0; }
  void all_reduce_sum(float*, size_t) override {}
  void all_reduce_max(float*, size_t) override {}
  void all_reduce_sum_bf16(void*, size_t) override {}

 private:
  int size_;
};

struct Passes {
  double f = 0, b = 0, w = 0, ball = 0;
  Passes operator-(const Passes& o) const {
    return {std::max(0.0, f - o.f), std::max(0.0, b - o.b), std::max(0.0, w - o.w), std::max(0.0, ball - o.ball)};
  }
};

enum class Part { kFirst, kMiddle, kLast };

// One stage shard's passes for a micro-batch: F, B and W of a split backward, and the whole
// backward in one pass. Inputs and gradients are zeros (the kernels' time does not follow the
// values; zeros are neither denormal nor NaN in either precision).
Passes time_stage(const model::GptConfig& cfg, Part part, model::Backend& backend, int B, int T,
                  DType precision, model::Recompute recompute, int reps) {
  std::unique_ptr<SliceOnly> comm = cfg.tp_size > 1 ? std::make_unique<SliceOnly>(cfg.tp_size) : nullptr;
  model::Gpt gpt(cfg, backend, B, T, comm.get(), 1, precision, model::ActivationPolicy{recompute, true});
  gpt.init_weights(1234);
  device::DeviceMemory& mem = *backend.memory;
  device::DeviceArray<float> input(mem, gpt.boundary_floats(B, T)), grad(mem, gpt.boundary_floats(B, T));
  input.zero();
  grad.zero();
  std::vector<int> tokens(size_t(B) * T), targets(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int(i % size_t(cfg.vocab)), targets[i] = int((i + 1) % size_t(cfg.vocab));
  gpt.set_slot(0);
  auto forward = [&] {
    gpt.forward_stage(part == Part::kFirst ? tokens.data() : nullptr, part == Part::kFirst ? nullptr : input.data(),
                      part == Part::kLast ? targets.data() : nullptr, B, T);
  };
  auto backward = [&](model::Pass pass) {
    if (part == Part::kLast) gpt.backward(1.0f, pass);
    else gpt.backward_stage(grad.data(), pass);
  };
  Passes p;
  p.f = least_ms(mem, reps, forward);
  // B needs its forward, W its B: each timed alone, the passes it needs run before, untimed.
  std::vector<double> b, w, ball;
  for (int i = 0; i <= reps; ++i) {
    forward();
    mem.synchronize();
    auto t0 = std::chrono::steady_clock::now();
    backward(model::Pass::kInput);
    mem.synchronize();
    auto t1 = std::chrono::steady_clock::now();
    gpt.backward_weights();
    mem.synchronize();
    auto t2 = std::chrono::steady_clock::now();
    forward();
    mem.synchronize();
    auto t3 = std::chrono::steady_clock::now();
    backward(model::Pass::kAll);
    mem.synchronize();
    auto t4 = std::chrono::steady_clock::now();
    if (i == 0) continue;  // the untimed first run
    b.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    w.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
    ball.push_back(std::chrono::duration<double, std::milli>(t4 - t3).count());
  }
  p.b = *std::min_element(b.begin(), b.end()), p.w = *std::min_element(w.begin(), w.end());
  p.ball = *std::min_element(ball.begin(), ball.end());
  if (part == Part::kLast) gpt.take_loss_sum();  // drops the losses kept for a step's read
  return p;
}

model::Recompute recompute_of(const std::string& name) {
  return name == "full" ? model::Recompute::kFull : name == "selective" ? model::Recompute::kSelective
                                                                        : model::Recompute::kNone;
}

// The precision a job of `spec` trains in on this backend (as the trainer decides it).
DType precision_on(const spec::JobSpec& spec, const model::Backend& backend) {
  return spec.trains_bf16(backend.kernels->supports(DType::kBf16)) ? DType::kBf16
                                                                               : DType::kF32;
}

}  // namespace

ComputeSweep default_sweep(const spec::JobSpec& spec, int devices) {
  ComputeSweep s;
  const model::GptConfig shape = spec::model_config(spec.model);
  for (int t = 1; t <= std::max(1, devices); ++t)
    if (model::tp_divides(shape, t)) s.tp.push_back(t);
  if (spec.train.micro_batch != spec::kAuto) s.micro_batches = {spec.train.micro_batch};
  else
    for (int mb : {1, 2, 4, 8, 16})
      if (spec.train.global_batch % mb == 0) s.micro_batches.push_back(mb);
  if (s.micro_batches.empty()) s.micro_batches = {1};
  return s;
}

topo::ComputeTable measure_compute(const spec::JobSpec& spec, model::Backend& backend, const ComputeSweep& sweep,
                                   const std::function<void(const std::string&)>& say) {
  const model::GptConfig global = parallel::gpt_config_of(spec);
  const DType precision = precision_on(spec, backend);
  const int L = global.layers, T = spec.train.seq_len;
  topo::ComputeTable table;
  table.precision = dtype_name(precision);
  table.model = plan::shape_key(global);
  for (int tp : sweep.tp)
    for (int mb : sweep.micro_batches) {
      // A layer: a middle stage of up to four layers (no embedding, no head) over its layers,
      // its boundary copies spread over them; the embedding and the head: a first and a last
      // stage of one layer less a layer (at least 0). Models of fewer than 3 layers: a whole
      // stage over its layers (the edges then go unmeasured).
      const bool parts = L >= 3;
      const int n_mid = std::min(4, L - 2);
      for (const std::string& mode : sweep.recompute) {
        const model::Recompute r = recompute_of(mode);
        Passes layer;
        if (parts) {
          const Passes mid = time_stage(global.shard(tp, 0, 1, n_mid), Part::kMiddle, backend, mb, T, precision, r,
                                        sweep.reps);
          layer = {mid.f / n_mid, mid.b / n_mid, mid.w / n_mid, mid.ball / n_mid};
        } else {
          const Passes whole = time_stage(global.shard(tp, 0, 0, -1), Part::kLast, backend, mb, T, precision, r,
                                          sweep.reps);
          layer = {whole.f / L, whole.b / L, whole.w / L, whole.ball / L};
        }
        table.layers.push_back({tp, mb, T, mode, layer.f, layer.b, layer.w, layer.ball});
        say(fmt::format("layer tp {} micro-batch {} T {} recompute {}: F {:.4g} B {:.4g} W {:.4g} ms, backward in one "
                        "pass {:.4g} ms", tp, mb, T, mode, layer.f, layer.b, layer.w, layer.ball));
        if (!parts || mode != "none") continue;  // the edges are not recomputed
        const Passes first = time_stage(global.shard(tp, 0, 0, 1), Part::kFirst, backend, mb, T, precision, r,
                                        sweep.reps) - layer;
        const Passes last = time_stage(global.shard(tp, 0, L - 1, 1), Part::kLast, backend, mb, T, precision, r,
                                       sweep.reps) - layer;
        table.embedding.push_back({tp, mb, T, first.f, first.b, first.w});
        table.head.push_back({tp, mb, T, last.f, last.b, last.w});
        say(fmt::format("embedding tp {} micro-batch {}: F {:.4g} B {:.4g} W {:.4g} ms; head and loss: F {:.4g} B {:.4g} "
                        "W {:.4g} ms", tp, mb, first.f, first.b, first.w, last.f, last.b, last.w));
      }
    }
  measure_kernels(global, backend, precision, sweep, T, table, say);
  return table;
}

}  // namespace holmes::tools
