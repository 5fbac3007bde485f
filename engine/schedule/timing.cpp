#include "engine/schedule/timing.hpp"

#include <algorithm>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace holmes::schedule {

namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

// The boundary a transfer of `stage` crosses, as the virtual stage on its lower side, and its
// direction (0: activation, 1: gradient). Both ends compute the same.
struct Boundary {
  int direction, lower;
};

Boundary boundary_of(int stage, int stages, const PipeTransfer& t) {
  const bool activation = t.kind == P2PKind::kSendActivation || t.kind == P2PKind::kRecvActivation;
  const bool toward_next = t.kind == P2PKind::kSendActivation || t.kind == P2PKind::kRecvGrad;
  const int lower_stage = toward_next ? stage : (stage + stages - 1) % stages;
  return {activation ? 0 : 1, link_chunk(stage, t) * stages + lower_stage};
}

}  // namespace

double pipeline_makespan(PipeSchedule kind, int stages, int m, int chunks, std::span<const PassTimes> passes,
                         std::span<const HopTimes> hops, const MessageDelay& delay) {
  if (kind != PipeSchedule::kInterleaved) chunks = 1;
  const int virtual_stages = stages * chunks;
  if (static_cast<int>(passes.size()) != stages || static_cast<int>(hops.size()) != virtual_stages - 1)
    throw std::invalid_argument("pipeline_makespan: " + std::to_string(passes.size()) + " stages' passes and " +
                                std::to_string(hops.size()) + " hops for " + std::to_string(stages) + " stages of " +
                                std::to_string(chunks) + " chunk(s)");
  std::vector<std::vector<PipeStep>> table(stages);
  for (int s = 0; s < stages; ++s) table[s] = schedule_steps(kind, stages, s, m, chunks);
  // [stage][(direction * virtual_stages + lower) * m + micro] -> the comm step holding it.
  const auto key = [&](int direction, int lower, int micro) { return (direction * virtual_stages + lower) * m + micro; };
  std::vector<double> waits(delay ? 2 * virtual_stages * m : 0, 0.0);  // by key: each message's own delay
  if (delay)
    for (int d = 0; d < 2; ++d)
      for (int b = 0; b + 1 < virtual_stages; ++b)
        for (int i = 0; i < m; ++i) waits[key(d, b, i)] = delay(d, b, i);
  std::vector<std::vector<int>> step_of(stages, std::vector<int>(2 * virtual_stages * m, -1));
  for (int s = 0; s < stages; ++s)
    for (size_t i = 0; i < table[s].size(); ++i)
      for (const PipeTransfer& t : table[s][i].transfers) {
        const Boundary b = boundary_of(s, stages, t);
        step_of[s][key(b.direction, b.lower, t.micro)] = static_cast<int>(i);
      }
  // Each step's time once the times it waits for are known, the stages walked in turn: a stage
  // goes on until it reaches a batch whose peers have not yet posted theirs (its end, and so
  // every later step, needs their start) or a compute step whose receive has not ended. Each
  // step is settled once.
  std::vector<std::vector<double>> start(stages), end(stages);
  for (int s = 0; s < stages; ++s) start[s].assign(table[s].size(), kNever), end[s].assign(table[s].size(), kNever);
  std::vector<size_t> next(stages, 0);
  std::vector<double> clock(stages, 0), comm_free(stages, 0);
  for (bool moved = true; moved;) {
    moved = false;
    for (int s = 0; s < stages; ++s) {
      for (; next[s] < table[s].size(); ++next[s], moved = true) {
        const size_t i = next[s];
        const PipeStep& st = table[s][i];
        if (st.kind == PipeOpKind::kComm) {
          if (start[s][i] == kNever) start[s][i] = std::max(clock[s], comm_free[s]);  // posted
          double e = start[s][i];
          for (const PipeTransfer& t : st.transfers) {
            const Boundary bd = boundary_of(s, stages, t);
            const int j = step_of[t.peer_stage][key(bd.direction, bd.lower, t.micro)];
            const double peer = j < 0 ? kNever : start[t.peer_stage][j];
            const HopTimes& h = hops[bd.lower];
            const double own = waits.empty() ? 0.0 : waits[key(bd.direction, bd.lower, t.micro)];
            e = std::max(e, peer + (bd.direction == 0 ? h.activation_s : h.gradient_s) + own);
          }
          if (e == kNever) break;
          end[s][i] = comm_free[s] = e;
          continue;
        }
        const int v = st.chunk * stages + s;
        const bool forward = st.kind == PipeOpKind::kForward;
        if ((forward && v > 0) || (st.kind == PipeOpKind::kBackward && v < virtual_stages - 1)) {
          const int j = step_of[s][forward ? key(0, v - 1, st.micro) : key(1, v, st.micro)];
          if (j < 0 || end[s][j] == kNever) break;
          clock[s] = std::max(clock[s], end[s][j]);
        }
        const PassTimes& p = passes[s];
        clock[s] += forward ? p.forward_s : st.kind == PipeOpKind::kBackward ? p.backward_s : p.weights_s;
      }
    }
  }
  double makespan = 0;  // a stage that never finished (no table does): never
  for (int s = 0; s < stages; ++s)
    makespan = next[s] < table[s].size() ? kNever : std::max({makespan, clock[s], comm_free[s]});
  return makespan;
}

double expected_pipeline_makespan(PipeSchedule kind, int stages, int m, int chunks, std::span<const PassTimes> passes,
                                  std::span<const HopTimes> hops, std::span<const double> delay_s, int samples,
                                  unsigned seed) {
  if (kind != PipeSchedule::kInterleaved) chunks = 1;
  if (static_cast<int>(delay_s.size()) != stages * chunks - 1)
    throw std::invalid_argument("expected_pipeline_makespan: " + std::to_string(delay_s.size()) + " delays for " +
                                std::to_string(stages * chunks - 1) + " boundaries");
  const bool any = std::any_of(delay_s.begin(), delay_s.end(), [](double d) { return d > 0; });
  if (!any || samples < 1) return pipeline_makespan(kind, stages, m, chunks, passes, hops);
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> unit(1.0);  // scaled by each boundary's mean
  const MessageDelay draw = [&](int, int boundary, int) {
    const double mean = delay_s[boundary];
    return mean > 0 ? mean * unit(rng) : 0.0;
  };
  double sum = 0;
  for (int k = 0; k < samples; ++k) sum += pipeline_makespan(kind, stages, m, chunks, passes, hops, draw);
  return sum / samples;
}

}  // namespace holmes::schedule
