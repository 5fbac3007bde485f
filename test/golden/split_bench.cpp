// CPU time of one pipeline stage's backward, fused (1F1B, Pass::kAll) against split into B and W
// (ZB-H1, Pass::kInput + backward_weights), over the same micro-batches in each schedule's own
// order (engine/schedule/schedule.hpp), on the thread that computes: CLOCK_THREAD_CPUTIME_ID,
// so time another process takes from this one on a loaded machine is not counted. Three
// variants of the stage: 1f1b; zb-h1 as PipelineStage runs it (a W right behind its own B
// joins it in one pass: joins_weights); zb-h1 with every B and W apart. They take turns step
// by step (the order reversed every other step), so each step gives paired ratios. A
// benchmark, not a test (docs/training.md, "What the split backward costs on a CPU").
// Usage: holmes-split-bench L C NH V B T STAGES STAGE MICRO STEPS [THREADS]
//   the paper scenario's stage 0: holmes-split-bench 16 256 4 257 4 64 2 0 4 40
// Prints per variant the median CPU ms per step of the forwards, the backward passes and
// their B and W parts, the median and quartiles of the per-step ratios against 1f1b, and
// whether every variant's gradients equal 1f1b's bit for bit after every step (exit 1 if not).
#include <cblas.h>
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <random>
#include <vector>

#include "backends/backends.hpp"
#include "engine/schedule/schedule.hpp"
#include "model/cpu/blas_core.hpp"
#include "model/gpt.hpp"
#include "model/gpt2/gpt2.hpp"

using namespace holmes;

namespace {

double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

// CPU ms of one step's passes, by kind: whole backwards and B passes count as `backward`.
struct StepTimes {
  double forward = 0, backward = 0, weights = 0;
  double grad() const { return backward + weights; }
  double step() const { return forward + grad(); }
};

struct Variant {
  const char* name;
  schedule::PipeSchedule schedule;
  bool join_adjacent;  // run B + its W as one pass where joins_weights says so
  std::vector<schedule::PipeStep> steps;
  std::unique_ptr<model::Gpt> gpt;
  std::vector<StepTimes> times;
};

struct Inputs {
  int B, T, micro;
  std::vector<int> tokens, targets;  // (micro, B*T)
  std::vector<float> acts, grads;    // (micro, B*T*C): the stage's input / its output's gradient
};

void backward(model::Gpt& g, const Inputs& in, int m, model::Pass pass) {
  const size_t BTC = static_cast<size_t>(in.B) * in.T * g.config().hidden;
  if (g.config().has_head)
    g.backward(1.0f / static_cast<float>(in.micro), pass);
  else
    g.backward_stage(in.grads.data() + m * BTC, pass);
}

// One training step's passes of the stage in its schedule's order; the comm steps are left
// out (host memory stands in for what they would move).
void run_step(Variant& v, const Inputs& in) {
  model::Gpt& g = *v.gpt;
  const model::GptConfig& cfg = g.config();
  const size_t BT = static_cast<size_t>(in.B) * in.T, BTC = BT * cfg.hidden;
  const bool split = g.policy().split_backward;
  g.zero_grad();
  StepTimes t;
  for (size_t i = 0; i < v.steps.size(); ++i) {
    const schedule::PipeStep& st = v.steps[i];
    if (st.kind == schedule::PipeOpKind::kComm) continue;
    const int m = st.micro;
    g.set_slot(m % g.slots());
    const double t0 = thread_cpu_ms();
    if (st.kind == schedule::PipeOpKind::kForward) {
      g.forward_stage(cfg.has_embedding ? in.tokens.data() + m * BT : nullptr,
                      cfg.has_embedding ? nullptr : in.acts.data() + m * BTC,
                      cfg.has_head ? in.targets.data() + m * BT : nullptr, in.B, in.T);
      t.forward += thread_cpu_ms() - t0;
    } else if (st.kind == schedule::PipeOpKind::kBackward) {
      const bool whole = !split || (v.join_adjacent && schedule::joins_weights(v.steps, i, in.micro));
      backward(g, in, m, whole ? model::Pass::kAll : model::Pass::kInput);
      if (split && whole) ++i;
      t.backward += thread_cpu_ms() - t0;
    } else {
      g.backward_weights();
      t.weights += thread_cpu_ms() - t0;
    }
  }
  g.take_loss_sum();
  v.times.push_back(t);
}

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double at = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(at);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (at - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

template <class F>
std::vector<double> column(const std::vector<StepTimes>& ts, F&& f) {
  std::vector<double> out;
  for (const StepTimes& t : ts) out.push_back(f(t));
  return out;
}

Inputs make_inputs(int B, int T, int C, int V, int M) {
  Inputs in{B, T, M, {}, {}, {}, {}};
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> tok(0, V - 1);
  std::normal_distribution<float> act(0.0f, 1.0f), grad(0.0f, 1e-3f);
  in.tokens.resize(static_cast<size_t>(M) * B * T);
  in.targets.resize(in.tokens.size());
  for (size_t i = 0; i < in.tokens.size(); ++i) in.tokens[i] = tok(rng), in.targets[i] = tok(rng);
  in.acts.resize(in.tokens.size() * C);
  in.grads.resize(in.acts.size());
  for (float& x : in.acts) x = act(rng);
  for (float& x : in.grads) x = grad(rng);
  return in;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 11) {
    fmt::print(stderr, "usage: holmes-split-bench L C NH V B T STAGES STAGE MICRO STEPS [THREADS]\n");
    return 2;
  }
  int a[10];
  for (int i = 0; i < 10; ++i) a[i] = std::atoi(argv[i + 1]);
  const int L = a[0], C = a[1], NH = a[2], V = a[3], B = a[4], T = a[5], P = a[6], stage = a[7], M = a[8];
  const int steps = a[9], threads = argc > 11 ? std::atoi(argv[11]) : 1;
  if (L < P || P < 1 || stage < 0 || stage >= P || M < 1 || steps < 2 || threads < 1 || B < 1 || T < 1 || C < 1 ||
      NH < 1 || C % NH != 0 || V < 2) {
    fmt::print(stderr, "holmes-split-bench: bad sizes (need 1 <= STAGES <= L, 0 <= STAGE < STAGES, C % NH == 0, "
                       "MICRO >= 1, STEPS >= 2, THREADS >= 1)\n");
    return 2;
  }
  // One worker of the lab: OMP_NUM_THREADS = OPENBLAS_NUM_THREADS = threads_per_worker (1).
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
  auto backend = backends::make_backend(backends::Device::kCpu);
  // The stage's layers as an even split gives them.
  const int first = stage * L / P, count = (stage + 1) * L / P - first;
  const model::GptConfig cfg = model::gpt2::config(L, C, NH, V, T).shard(1, 0, first, count);

  Variant vs[3] = {{"1f1b", schedule::PipeSchedule::k1f1b, false, {}, nullptr, {}},
                   {"zb-h1", schedule::PipeSchedule::kZbH1, true, {}, nullptr, {}},
                   {"zb-h1 B|W", schedule::PipeSchedule::kZbH1, false, {}, nullptr, {}}};
  for (Variant& v : vs) {
    v.steps = schedule::schedule_steps(v.schedule, P, stage, M);
    model::ActivationPolicy policy;
    policy.split_backward = v.schedule == schedule::PipeSchedule::kZbH1;
    v.gpt = std::make_unique<model::Gpt>(cfg, backend, B, T, nullptr, schedule::max_in_flight(v.steps),
                                         holmes::DType::kF32, policy);
    v.gpt->init_weights(1);
  }
  const Inputs in = make_inputs(B, T, C, V, M);

  // Two warm-up rounds (first touches of the slots), then the variants in turns.
  bool identical = true;
  std::vector<float> ref, got;
  for (int i = 0; i < steps + 2; ++i) {
    for (int k = 0; k < 3; ++k) run_step(vs[i % 2 == 0 ? k : 2 - k], in);
    ref.assign(vs[0].gpt->grads(), vs[0].gpt->grads() + vs[0].gpt->num_params());
    for (int k = 1; k < 3; ++k) {
      got.assign(vs[k].gpt->grads(), vs[k].gpt->grads() + vs[k].gpt->num_params());
      identical = identical && std::memcmp(ref.data(), got.data(), ref.size() * sizeof(float)) == 0;
    }
  }
  for (Variant& v : vs) v.times.erase(v.times.begin(), v.times.begin() + 2);

  fmt::print("split-bench: {} stage {} of {} (layers {}..{}{}{}), B={} T={} micro-batches {}, {} thread(s), "
             "openblas {}, {} steps per variant, thread CPU time\n",
             cfg.global().describe(), stage, P, first, first + count - 1, cfg.has_embedding ? ", embedding" : "",
             cfg.has_head ? ", head" : "", B, T, M, threads, model::cpu::ensure_fast_blas(), steps);
  for (const Variant& v : vs) {
    const auto f = column(v.times, [](const StepTimes& t) { return t.forward; });
    const auto b = column(v.times, [](const StepTimes& t) { return t.backward; });
    const auto w = column(v.times, [](const StepTimes& t) { return t.weights; });
    const auto g = column(v.times, [](const StepTimes& t) { return t.grad(); });
    fmt::print("split-bench: {:9} forward {:7.2f} ms  backward {:7.2f} ms (B or whole {:7.2f} + W {:7.2f})  per "
               "step, medians\n",
               v.name, quantile(f, 0.5), quantile(g, 0.5), quantile(b, 0.5), quantile(w, 0.5));
  }
  for (int k = 1; k < 3; ++k) {
    std::vector<double> grad, step;
    for (int i = 0; i < steps; ++i) {
      grad.push_back(vs[k].times[i].grad() / vs[0].times[i].grad());
      step.push_back(vs[k].times[i].step() / vs[0].times[i].step());
    }
    fmt::print("split-bench: {:9} / 1f1b per step: backward median {:.4f} (quartiles {:.4f} {:.4f}), forward + "
               "backward median {:.4f} (quartiles {:.4f} {:.4f})\n",
               vs[k].name, quantile(grad, 0.5), quantile(grad, 0.25), quantile(grad, 0.75), quantile(step, 0.5),
               quantile(step, 0.25), quantile(step, 0.75));
  }
  fmt::print("split-bench: gradients bit-identical to 1f1b after every step: {}\n", identical ? "yes" : "NO");
  return identical ? 0 : 1;
}
