// Pipeline schedules as pure tables: for one pipeline stage, the ordered list of steps it
// runs in one optimizer step (forwards, backwards and point-to-point batches). No
// communication happens here; the runner walks the list and posts each comm step through
// ProcessGroup::send_recv (comm/process_group.hpp), tagging every op with p2p_tag.
//
// Point-to-point ops have rendezvous semantics (as NCCL): a send completes only when the
// peer has posted the matching recv. Every op of one comm step is posted together and the
// stage moves on once all of them completed. See schedule.cpp for why the batching chosen
// by one_f_one_b never deadlocks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace holmes::parallel {

// kBackward is the whole backward of a micro-batch (1F1B) or, in a schedule that has kWeights
// steps (zero-bubble), its B pass alone (input gradients); kWeights is its W pass (the GEMMs'
// weight gradients, model::Gpt::backward_weights).
enum class PipeOpKind { kForward, kBackward, kComm, kWeights };
// Which table a stage runs (parallel.schedule resolved by the planner).
enum class PipeSchedule { k1f1b, kZbH1 };
const char* pipe_schedule_name(PipeSchedule s);  // "1f1b", "zb-h1"
// Activations flow from stage s to s+1, gradients from s+1 back to s.
enum class P2PKind { kSendActivation, kRecvActivation, kSendGrad, kRecvGrad };

struct PipeTransfer {
  P2PKind kind;
  int micro;       // micro-batch index in [0, micro_batches)
  int peer_stage;  // stage + 1 for kSendActivation / kRecvGrad, stage - 1 otherwise

  bool operator==(const PipeTransfer&) const = default;
};

struct PipeStep {
  PipeOpKind kind;
  int micro = -1;                       // for kForward / kBackward / kWeights; -1 for kComm
  std::vector<PipeTransfer> transfers;  // for kComm: 1 or 2 ops posted together

  bool operator==(const PipeStep&) const = default;
};

// Non-interleaved 1F1B (PipeDream-Flush, Megatron-LM's default) for `stage` of `stages`
// with `micro_batches` micro-batches: warm-up forwards (min(stages - stage - 1, m)), steady
// 1F1B, cool-down backwards. Forward of micro j on stage s is preceded by RecvActivation(j)
// from s-1 (s > 0) and followed by SendActivation(j) to s+1 (s < last); backward of j is
// preceded by RecvGrad(j) from s+1 (s < last) and followed by SendGrad(j) to s-1 (s > 0).
// Throws std::invalid_argument for stages < 1, stage outside [0, stages), micro_batches < 1
// (callers validate user input first; reaching here with such values is a programming error).
std::vector<PipeStep> one_f_one_b(int stages, int stage, int micro_batches);

// ZB-H1 (Qi et al., arXiv 2401.10241) as this runner posts it: 1F1B's forwards, B passes and
// comm steps in 1F1B's order, each backward split into B and W, and the W passes of stage s
// held back by s steady iterations (W(i - s) after iteration i's [sG rA] post; the ones still
// held run one per cool-down iteration and at the end). Held-back W passes are what fills the
// bubbles: the later stages' B chain reaches stage 0 sooner, stage 0's W's run while it waits
// for gradients, and a W placed after a post covers the wait for its received tensor. Every
// stage holds min(stages, micro_batches) micro-batches at its peak: 1F1B's stage 0 figure,
// on every stage (schedule.cpp).
std::vector<PipeStep> zero_bubble_h1(int stages, int stage, int micro_batches);
// The table of `kind` (one_f_one_b or zero_bubble_h1).
std::vector<PipeStep> schedule_steps(PipeSchedule kind, int stages, int stage, int micro_batches);

// Most activations `stage` holds at once under one_f_one_b (forwards done whose backward has
// not run): min(stages - stage, micro_batches). Same argument checks as one_f_one_b.
int max_in_flight(int stages, int stage, int micro_batches);
// The same for any table: the most micro-batches whose forward ran and whose last backward
// pass (W when the table has kWeights steps, else B) has not; an activation slot of the model
// each. For zero_bubble_h1: min(stages, micro_batches).
int max_in_flight(const std::vector<PipeStep>& steps);
int max_in_flight(PipeSchedule kind, int stages, int stage, int micro_batches);

// Tag of the transfer of micro-batch `micro` in the direction of `kind`. A send and its
// matching recv get the same tag (kSendActivation and kRecvActivation agree, as do the two
// grad kinds); activations and grads never share a tag. Throws std::invalid_argument for
// micro outside [0, kMaxTaggedMicro].
constexpr int kMaxTaggedMicro = 0x3fffffff;
uint32_t p2p_tag(P2PKind kind, int micro);

// The kind on the other side of a transfer: send activation <-> recv activation, etc.
P2PKind matching_kind(P2PKind kind);
// True for kSendActivation and kSendGrad.
bool is_send(P2PKind kind);

// "F3", "B0", "W0", "sA1" (one op) or "[sA1 rG0]" (one batch).
std::string to_string(const PipeStep& step);
// Human-readable table of all stages' steps, one line per stage:
//   "stage 0: F0 sA0 F1 [sA1 rG0] B0 ..."
std::string format_schedule(int stages, int micro_batches, PipeSchedule kind = PipeSchedule::k1f1b);

}  // namespace holmes::parallel
