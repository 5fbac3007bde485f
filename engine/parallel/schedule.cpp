// 1F1B step tables. Layout of one stage s of S with m micro-batches (w = warm-up count):
//
//   warm-up   j < w:        rA(j)  F(j)  sA(j)
//   steady    i < m - w:    (rA(w) once before the first iteration)
//                           F(w+i)  [sA(w+i) rG(i)]  B(i)  [sG(i) rA(w+i+1)]
//                           (the last iteration sends sG(i) alone: no forward is left)
//   cool-down i >= m - w:   rG(i)  B(i)  sG(i)
//
// Ops toward a missing neighbour are dropped (stage 0 has no rA / sG, the last stage no
// sA / rG), and a comm step left with no op is dropped.
//
// Why the steady-state batches cannot deadlock under rendezvous semantics: with
// w(s) = S - s - 1, stage s in steady iteration i posts [sA(w+i) rG(i)] while its successor
// s+1 (w' = w - 1) in the same iteration posts [sG(i) rA(w'+i+1)] = [sG(i) rA(w+i)]. Each
// send finds its matching recv in the peer's batch, so both batches complete. Had both
// sides posted their send alone first ("send, then recv"), both sends would wait for recvs
// that are only posted after those sends complete: a cycle. (Batching on one side of the
// pair would break the cycle already; both sides batch, as Megatron-LM's
// send_forward_recv_backward / send_backward_recv_forward do, so that no stage's list
// relies on how its neighbour's list is written.) Warm-up and cool-down ops go
// one way only (activations downstream, gradients upstream), each stage waits only on
// work its neighbour does earlier in its own list, so they form no cycle either. The unit
// test simulates every stage under rendezvous semantics for S <= 16, m <= 64 to check this,
// including m < S where the warm-up is clamped to m.
//
// ZB-H1 keeps every comm step and every F and B of 1F1B in the same order and adds W steps,
// which are local compute: a W never posts, and never waits on a neighbour. Each stage's list
// of comm steps is therefore 1F1B's, and the argument above carries over unchanged; the W
// passes only move when a stage reaches its posts. Memory: with lag d = s, steady iteration i
// runs F(w+i) while W(0 .. i-d-1) ran, so w + 1 + min(i, d) micro-batches are held; with
// w = S - s - 1 that peaks at S - s - 1 + 1 + s = S for every stage once m >= S (and at m when
// m < S), which is 1F1B's peak on stage 0: the most any stage of 1F1B holds, now on every
// stage. The unit test checks the tables with the same simulator, both with rendezvous
// sends and with the runner's asynchronous posts, and times them against 1F1B.
#include "engine/parallel/schedule.hpp"

#include <algorithm>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <utility>

namespace holmes::parallel {
namespace {

void check_args(const char* fn, int stages, int stage, int micro_batches) {
  if (stages < 1)
    throw std::invalid_argument(std::string(fn) + ": stages must be >= 1, got " +
                                std::to_string(stages));
  if (stage < 0 || stage >= stages)
    throw std::invalid_argument(std::string(fn) + ": stage must be in [0, " +
                                std::to_string(stages) + "), got " + std::to_string(stage));
  if (micro_batches < 1)
    throw std::invalid_argument(std::string(fn) + ": micro_batches must be >= 1, got " +
                                std::to_string(micro_batches));
}

// Appends the steps of one stage; drops ops toward a neighbour outside [0, stages).
class StageBuilder {
 public:
  StageBuilder(int stages, int stage) : stages_(stages), stage_(stage) {}

  void forward(int micro) { steps_.push_back({PipeOpKind::kForward, micro, {}}); }
  void backward(int micro) { steps_.push_back({PipeOpKind::kBackward, micro, {}}); }
  void weights(int micro) { steps_.push_back({PipeOpKind::kWeights, micro, {}}); }

  // Ops that have a peer become one comm step posted together; absent peers are skipped.
  void comm(std::initializer_list<PipeTransfer> wanted) {
    std::vector<PipeTransfer> kept;
    for (const PipeTransfer& t : wanted)
      if (t.peer_stage >= 0 && t.peer_stage < stages_) kept.push_back(t);
    if (!kept.empty()) steps_.push_back({PipeOpKind::kComm, -1, std::move(kept)});
  }

  PipeTransfer recv_act(int micro) const { return {P2PKind::kRecvActivation, micro, stage_ - 1}; }
  PipeTransfer send_act(int micro) const { return {P2PKind::kSendActivation, micro, stage_ + 1}; }
  PipeTransfer recv_grad(int micro) const { return {P2PKind::kRecvGrad, micro, stage_ + 1}; }
  PipeTransfer send_grad(int micro) const { return {P2PKind::kSendGrad, micro, stage_ - 1}; }

  std::vector<PipeStep> take() { return std::move(steps_); }

 private:
  int stages_, stage_;
  std::vector<PipeStep> steps_;
};

const char* short_name(P2PKind kind) {
  switch (kind) {
    case P2PKind::kSendActivation: return "sA";
    case P2PKind::kRecvActivation: return "rA";
    case P2PKind::kSendGrad: return "sG";
    case P2PKind::kRecvGrad: return "rG";
  }
  return "?";
}

}  // namespace

const char* pipe_schedule_name(PipeSchedule s) {
  switch (s) {
    case PipeSchedule::k1f1b: return "1f1b";
    case PipeSchedule::kZbH1: return "zb-h1";
  }
  return "?";
}

namespace {

// 1F1B's steps; with `lag` >= 0 each backward is split and W(i - lag) follows steady iteration
// i's last post, the rest one per cool-down iteration and at the end (zero_bubble_h1).
std::vector<PipeStep> build_1f1b(int stages, int stage, int micro_batches, int lag) {
  const int m = micro_batches;
  const int warmup = std::min(stages - stage - 1, m);
  const int steady = m - warmup;
  StageBuilder b(stages, stage);
  int next_w = 0;  // next W pass to place
  auto weights_upto = [&](int last) {  // at most one W, and only one whose B ran
    if (lag >= 0 && next_w <= last) b.weights(next_w++);
  };

  for (int j = 0; j < warmup; ++j) {
    b.comm({b.recv_act(j)});
    b.forward(j);
    b.comm({b.send_act(j)});
  }
  if (steady > 0) b.comm({b.recv_act(warmup)});
  for (int i = 0; i < steady; ++i) {
    const int f = warmup + i;  // forward of this iteration; backward is of micro i
    b.forward(f);
    b.comm({b.send_act(f), b.recv_grad(i)});
    b.backward(i);
    if (i + 1 < steady)
      b.comm({b.send_grad(i), b.recv_act(f + 1)});
    else
      b.comm({b.send_grad(i)});
    weights_upto(i - lag);
  }
  for (int i = steady; i < m; ++i) {
    b.comm({b.recv_grad(i)});
    b.backward(i);
    b.comm({b.send_grad(i)});
    weights_upto(i);  // held-back W's fill the waits for the next gradient
  }
  while (lag >= 0 && next_w < m) b.weights(next_w++);
  return b.take();
}

}  // namespace

std::vector<PipeStep> one_f_one_b(int stages, int stage, int micro_batches) {
  check_args("one_f_one_b", stages, stage, micro_batches);
  return build_1f1b(stages, stage, micro_batches, -1);
}

std::vector<PipeStep> zero_bubble_h1(int stages, int stage, int micro_batches) {
  check_args("zero_bubble_h1", stages, stage, micro_batches);
  return build_1f1b(stages, stage, micro_batches, stage);
}

std::vector<PipeStep> schedule_steps(PipeSchedule kind, int stages, int stage, int micro_batches) {
  switch (kind) {
    case PipeSchedule::k1f1b: return one_f_one_b(stages, stage, micro_batches);
    case PipeSchedule::kZbH1: return zero_bubble_h1(stages, stage, micro_batches);
  }
  throw std::invalid_argument("schedule_steps: unknown PipeSchedule");
}

int max_in_flight(int stages, int stage, int micro_batches) {
  check_args("max_in_flight", stages, stage, micro_batches);
  // Warm-up holds min(S - s - 1, m); when a steady phase exists its first forward adds one
  // before the first backward frees one.
  return std::min(stages - stage, micro_batches);
}

int max_in_flight(const std::vector<PipeStep>& steps) {
  const bool split = std::any_of(steps.begin(), steps.end(), [](const PipeStep& s) { return s.kind == PipeOpKind::kWeights; });
  const PipeOpKind frees = split ? PipeOpKind::kWeights : PipeOpKind::kBackward;
  int held = 0, peak = 0;
  for (const PipeStep& s : steps) {
    if (s.kind == PipeOpKind::kForward) peak = std::max(peak, ++held);
    if (s.kind == frees) --held;
  }
  return peak;
}

int max_in_flight(PipeSchedule kind, int stages, int stage, int micro_batches) {
  return max_in_flight(schedule_steps(kind, stages, stage, micro_batches));
}

uint32_t p2p_tag(P2PKind kind, int micro) {
  if (micro < 0 || micro > kMaxTaggedMicro)
    throw std::invalid_argument("p2p_tag: micro must be in [0, " + std::to_string(kMaxTaggedMicro) +
                                "], got " + std::to_string(micro));
  // Bit 0 says which direction (0 activation, 1 gradient); the rest is the micro-batch, so
  // send and recv of one transfer agree and the two directions never collide.
  const bool grad = kind == P2PKind::kSendGrad || kind == P2PKind::kRecvGrad;
  return (static_cast<uint32_t>(micro) << 1) | (grad ? 1u : 0u);
}

P2PKind matching_kind(P2PKind kind) {
  switch (kind) {
    case P2PKind::kSendActivation: return P2PKind::kRecvActivation;
    case P2PKind::kRecvActivation: return P2PKind::kSendActivation;
    case P2PKind::kSendGrad: return P2PKind::kRecvGrad;
    case P2PKind::kRecvGrad: return P2PKind::kSendGrad;
  }
  throw std::invalid_argument("matching_kind: unknown P2PKind");
}

bool is_send(P2PKind kind) { return kind == P2PKind::kSendActivation || kind == P2PKind::kSendGrad; }

std::string to_string(const PipeStep& step) {
  switch (step.kind) {
    case PipeOpKind::kForward: return "F" + std::to_string(step.micro);
    case PipeOpKind::kBackward: return "B" + std::to_string(step.micro);
    case PipeOpKind::kWeights: return "W" + std::to_string(step.micro);
    case PipeOpKind::kComm: break;
  }
  std::string ops;
  for (const PipeTransfer& t : step.transfers) {
    if (!ops.empty()) ops += ' ';
    ops += short_name(t.kind) + std::to_string(t.micro);
  }
  return step.transfers.size() == 1 ? ops : "[" + ops + "]";
}

std::string format_schedule(int stages, int micro_batches, PipeSchedule kind) {
  check_args("format_schedule", stages, 0, micro_batches);
  std::string out;
  for (int s = 0; s < stages; ++s) {
    out += "stage " + std::to_string(s) + ":";
    for (const PipeStep& step : schedule_steps(kind, stages, s, micro_batches)) out += " " + to_string(step);
    out += '\n';
  }
  return out;
}

}  // namespace holmes::parallel
