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
//
// Interleaved 1F1B (interleaved_1f1b): stage s of p holds chunks c = 0..V-1, virtual stage
// c p + s. Every stage runs the same order of forwards k = 0..mV-1 and of backwards (the
// chunks reversed), with warm-up w_s = 2 (p - s - 1) + (V - 1) p. Number the comm steps of
// stage s by t: the one posted after forward k (with backward k - w_s in the steady phase)
// is t = k, the initial rA is t = -1, the one after cool-down backward k' is t = k' + w_s.
// Since the orders agree on every stage, the partner of each op sits at a fixed offset:
//   sA(k) of s < p-1   is received by s+1 in its step t - 1   (its forward k, one earlier)
//   sA(k) of p-1       is received by 0   in its step t + p-1 (forward k + p: next chunk)
//   sG of s > 0        is received by s-1 in its step t + 1   (w_{s-1} = w_s + 2)
//   sG of 0            is received by p-1 in its step t - (p-1)
// and every recv is the other end of one of these. A step completes once each partner step
// is posted, i.e. once the step before the partner completed. So completing (s, t) waits
// on completing (s+1, t-2), (s-1, t), (p-1, t-p) or (0, t+p-2), and each of these has a
// smaller s + t than s + t: the waits cannot form a cycle, and since each stage posts its
// steps in t order, every step completes. This needs all ops of a step posted together
// (the argument treats a step as one unit): posted one op at a time, sends first, the
// steady-phase sends of neighbours wait on each other as in 1F1B, and the unit test's
// simulator shows those tables deadlock. Where the warm-up
// is clamped to mV (the first stages when m V is small, no steady phase) the offsets above
// change; the unit test simulates every stage with rendezvous sends for p <= 8, V <= 4,
// m <= 4p, in order and at random, and checks those too.
//
// Bubble: with a stage's work per micro-batch split evenly over its V chunks (t_F / V,
// t_B / V each), the warm-up and cool-down idle time is (p - 1)(t_F + t_B) / V, 1F1B's
// divided by V (Narayanan et al., SC'21); the unit test's timing simulator shows it exactly
// for m a multiple of p. The price: each micro-batch crosses every stage boundary V times
// (V p - 1 sends each way instead of p - 1), including the wrap-around from stage p-1 to 0.
// Memory: stage s holds at most min(w_s + 1, m V) chunk-micro-batches (the warm-up plus the
// steady phase's forward before its backward), each 1/V of the stage's layers: stage 0 holds
// (p V + p - 1) / V = p + (p - 1) / V micro-batches' activations against 1F1B's p, the
// (1 + (p - 1) / (p V)) factor of Megatron's formula; later stages less.
#include "engine/schedule/schedule.hpp"

#include <algorithm>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <utility>

namespace holmes::schedule {
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
    case PipeSchedule::kInterleaved: return "interleaved";
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

bool joins_weights(const std::vector<PipeStep>& steps, size_t i, int micro_batches) {
  if (i + 1 >= steps.size() || steps[i].kind != PipeOpKind::kBackward || steps[i].micro + 1 >= micro_batches)
    return false;
  const PipeStep& w = steps[i + 1];
  return w.kind == PipeOpKind::kWeights && w.chunk == steps[i].chunk && w.micro == steps[i].micro;
}

std::vector<PipeStep> zero_bubble_h1(int stages, int stage, int micro_batches) {
  check_args("zero_bubble_h1", stages, stage, micro_batches);
  return build_1f1b(stages, stage, micro_batches, stage);
}

namespace {

// One stage of interleaved_1f1b: `p` stages, `v` chunks, m micro-batches (m % p == 0).
class InterleavedBuilder {
 public:
  InterleavedBuilder(int p, int stage, int m, int v) : p_(p), s_(stage), m_(m), v_(v) {}

  int total() const { return m_ * v_; }
  // Forward k / backward k: its chunk and micro-batch (interleaved_1f1b in schedule.hpp).
  int chunk(int k, bool forward) const {
    const int c = (k % (p_ * v_)) / p_;
    return forward ? c : v_ - 1 - c;
  }
  int micro(int k) const { return (k / (p_ * v_)) * p_ + k % p_; }

  void forward(int k) { steps_.push_back({PipeOpKind::kForward, micro(k), {}, chunk(k, true)}); }
  void backward(int k) { steps_.push_back({PipeOpKind::kBackward, micro(k), {}, chunk(k, false)}); }

  // The transfers around forward / backward k, where that virtual stage has the neighbour;
  // k outside [0, total) gives none (nothing left to receive).
  void recv_act(int k) { add(k, true, P2PKind::kRecvActivation); }
  void send_act(int k) { add(k, true, P2PKind::kSendActivation); }
  void recv_grad(int k) { add(k, false, P2PKind::kRecvGrad); }
  void send_grad(int k) { add(k, false, P2PKind::kSendGrad); }
  // Posts the transfers added since the last post as one comm step (none: no step).
  void post() {
    if (!batch_.empty()) steps_.push_back({PipeOpKind::kComm, -1, std::move(batch_)});
    batch_.clear();
  }

  std::vector<PipeStep> take() { return std::move(steps_); }

 private:
  void add(int k, bool forward, P2PKind kind) {
    if (k < 0 || k >= total()) return;
    const int c = chunk(k, forward);
    const int vs = virtual_stage(p_, s_, c);
    const bool toward_next = kind == P2PKind::kSendActivation || kind == P2PKind::kRecvGrad;
    if (toward_next ? vs == p_ * v_ - 1 : vs == 0) return;  // the ends of the virtual pipeline
    batch_.push_back({kind, micro(k), (s_ + (toward_next ? 1 : p_ - 1)) % p_, c});
  }

  int p_, s_, m_, v_;
  std::vector<PipeStep> steps_;
  std::vector<PipeTransfer> batch_;
};

}  // namespace

std::vector<PipeStep> interleaved_1f1b(int stages, int stage, int micro_batches, int chunks) {
  check_args("interleaved_1f1b", stages, stage, micro_batches);
  if (stages < 2 || chunks < 2 || micro_batches % stages != 0)
    throw std::invalid_argument("interleaved_1f1b: needs stages >= 2, chunks >= 2 and micro_batches a multiple of "
                                "stages, got stages " + std::to_string(stages) + ", chunks " +
                                std::to_string(chunks) + ", micro_batches " + std::to_string(micro_batches));
  InterleavedBuilder b(stages, stage, micro_batches, chunks);
  const int total = b.total();
  const int warmup = std::min(2 * (stages - stage - 1) + (chunks - 1) * stages, total);
  const int steady = total - warmup;
  b.recv_act(0);
  b.post();
  for (int k = 0; k < warmup; ++k) {
    b.forward(k);
    b.send_act(k);
    b.recv_act(k + 1);
    if (k + 1 == warmup && steady > 0) b.recv_grad(0);  // the first steady backward's
    b.post();
  }
  for (int i = 0; i < steady; ++i) {
    const int k = warmup + i;  // this iteration's forward; its backward is i
    b.forward(k);
    b.backward(i);
    b.send_act(k);
    b.send_grad(i);
    b.recv_act(k + 1);
    b.recv_grad(i + 1);
    b.post();
  }
  if (steady == 0) {
    b.recv_grad(0);
    b.post();
  }
  for (int i = steady; i < total; ++i) {
    b.backward(i);
    b.send_grad(i);
    b.recv_grad(i + 1);
    b.post();
  }
  return b.take();
}

int virtual_stage(int stages, int stage, int chunk) { return chunk * stages + stage; }

std::vector<PipeStep> schedule_steps(PipeSchedule kind, int stages, int stage, int micro_batches, int chunks) {
  switch (kind) {
    case PipeSchedule::k1f1b: return one_f_one_b(stages, stage, micro_batches);
    case PipeSchedule::kZbH1: return zero_bubble_h1(stages, stage, micro_batches);
    case PipeSchedule::kInterleaved: return interleaved_1f1b(stages, stage, micro_batches, chunks);
  }
  throw std::invalid_argument("schedule_steps: unknown PipeSchedule");
}

int max_in_flight(int stages, int stage, int micro_batches) {
  check_args("max_in_flight", stages, stage, micro_batches);
  // Warm-up holds min(S - s - 1, m); when a steady phase exists its first forward adds one
  // before the first backward frees one.
  return std::min(stages - stage, micro_batches);
}

namespace {

// chunk < 0: every chunk's steps.
int peak_in_flight(const std::vector<PipeStep>& steps, int chunk) {
  const bool split = std::any_of(steps.begin(), steps.end(), [](const PipeStep& s) { return s.kind == PipeOpKind::kWeights; });
  const PipeOpKind frees = split ? PipeOpKind::kWeights : PipeOpKind::kBackward;
  int held = 0, peak = 0;
  for (const PipeStep& s : steps) {
    if (chunk >= 0 && s.chunk != chunk) continue;
    if (s.kind == PipeOpKind::kForward) peak = std::max(peak, ++held);
    if (s.kind == frees) --held;
  }
  return peak;
}

}  // namespace

int max_in_flight(const std::vector<PipeStep>& steps) { return peak_in_flight(steps, -1); }

int max_in_flight(const std::vector<PipeStep>& steps, int chunk) { return peak_in_flight(steps, chunk); }

int max_in_flight(PipeSchedule kind, int stages, int stage, int micro_batches, int chunks) {
  return max_in_flight(schedule_steps(kind, stages, stage, micro_batches, chunks));
}

uint32_t p2p_tag(P2PKind kind, int micro, int link) {
  if (micro < 0 || micro > kMaxTaggedMicro)
    throw std::invalid_argument("p2p_tag: micro must be in [0, " + std::to_string(kMaxTaggedMicro) +
                                "], got " + std::to_string(micro));
  if (link < 0 || link > kMaxTaggedChunk)
    throw std::invalid_argument("p2p_tag: link chunk must be in [0, " + std::to_string(kMaxTaggedChunk) +
                                "], got " + std::to_string(link));
  // Bit 0 says which direction (0 activation, 1 gradient), bits 1-23 the micro-batch, bits
  // 24-29 the boundary, so send and recv of one transfer agree and nothing else collides.
  // Boundary 0 gives the non-interleaved schedules' tags.
  const bool grad = kind == P2PKind::kSendGrad || kind == P2PKind::kRecvGrad;
  return (static_cast<uint32_t>(link) << 24) | (static_cast<uint32_t>(micro) << 1) | (grad ? 1u : 0u);
}

int link_chunk(int stage, const PipeTransfer& t) {
  const bool toward_next = t.kind == P2PKind::kSendActivation || t.kind == P2PKind::kRecvGrad;
  return toward_next || stage > 0 ? t.chunk : t.chunk - 1;
}

uint32_t p2p_tag(int stage, const PipeTransfer& t) { return p2p_tag(t.kind, t.micro, link_chunk(stage, t)); }

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
  auto chunk = [](int c) { return c > 0 ? "." + std::to_string(c) : std::string(); };
  switch (step.kind) {
    case PipeOpKind::kForward: return "F" + std::to_string(step.micro) + chunk(step.chunk);
    case PipeOpKind::kBackward: return "B" + std::to_string(step.micro) + chunk(step.chunk);
    case PipeOpKind::kWeights: return "W" + std::to_string(step.micro) + chunk(step.chunk);
    case PipeOpKind::kComm: break;
  }
  std::string ops;
  for (const PipeTransfer& t : step.transfers) {
    if (!ops.empty()) ops += ' ';
    ops += short_name(t.kind) + std::to_string(t.micro) + chunk(t.chunk);
  }
  return step.transfers.size() == 1 ? ops : "[" + ops + "]";
}

std::string format_schedule(int stages, int micro_batches, PipeSchedule kind, int chunks) {
  check_args("format_schedule", stages, 0, micro_batches);
  std::string out;
  for (int s = 0; s < stages; ++s) {
    out += "stage " + std::to_string(s) + ":";
    for (const PipeStep& step : schedule_steps(kind, stages, s, micro_batches, chunks)) out += " " + to_string(step);
    out += '\n';
  }
  return out;
}

}  // namespace holmes::schedule
