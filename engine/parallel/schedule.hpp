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

enum class PipeOpKind { kForward, kBackward, kComm };
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
  int micro = -1;                       // for kForward / kBackward; -1 for kComm
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

// Most activations `stage` holds at once under one_f_one_b (forwards done whose backward has
// not run): min(stages - stage, micro_batches). Same argument checks as one_f_one_b.
int max_in_flight(int stages, int stage, int micro_batches);

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

// "F3", "B0", "sA1" (one op) or "[sA1 rG0]" (one batch).
std::string to_string(const PipeStep& step);
// Human-readable table of all stages' steps, one line per stage:
//   "stage 0: F0 sA0 F1 [sA1 rG0] B0 ..."
std::string format_schedule(int stages, int micro_batches);

}  // namespace holmes::parallel
