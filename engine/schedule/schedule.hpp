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

namespace holmes::schedule {

// kBackward is the whole backward of a micro-batch (1F1B) or, in a schedule that has kWeights
// steps (zero-bubble), its B pass alone (input gradients); kWeights is its W pass (the GEMMs'
// weight gradients, model::Gpt::backward_weights).
enum class PipeOpKind { kForward, kBackward, kComm, kWeights };
// Which table a stage runs (parallel.schedule resolved by the planner).
enum class PipeSchedule { k1f1b, kZbH1, kInterleaved };
const char* pipe_schedule_name(PipeSchedule s);  // "1f1b", "zb-h1", "interleaved"
// Activations flow from stage s to s+1, gradients from s+1 back to s. In the interleaved
// schedule a stage (pipeline rank) holds `chunks` model chunks: chunk c of stage s is virtual
// stage c * stages + s, and activations flow from virtual stage v to v + 1 (from stage
// stages - 1 back to stage 0 between chunks: the wrap-around), gradients the other way.
enum class P2PKind { kSendActivation, kRecvActivation, kSendGrad, kRecvGrad };

struct PipeTransfer {
  P2PKind kind;
  int micro;       // micro-batch index in [0, micro_batches)
  int peer_stage;  // stage + 1 for kSendActivation / kRecvGrad, stage - 1 otherwise (mod stages
                   // in the interleaved schedule)
  int chunk = 0;   // the model chunk on this stage the transfer feeds or drains

  bool operator==(const PipeTransfer&) const = default;
};

struct PipeStep {
  PipeOpKind kind;
  int micro = -1;                       // for kForward / kBackward / kWeights; -1 for kComm
  std::vector<PipeTransfer> transfers;  // for kComm: the ops posted together (1 or 2; up to 4
                                        // in the interleaved schedule)
  int chunk = 0;                        // model chunk of a kForward / kBackward / kWeights

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
// Interleaved 1F1B (Narayanan et al., SC'21; Megatron-LM's schedule with virtual pipeline
// stages) for `stage` of `stages` holding `chunks` model chunks. The stage runs m * chunks
// forward passes: forward k is of chunk (k / stages) % chunks and micro-batch
// (k / (stages * chunks)) * stages + k % stages (groups of `stages` micro-batches go through
// every chunk before the next group starts); backward k the same with the chunks reversed.
// Warm-up: min(2 (stages - stage - 1) + (chunks - 1) stages, m * chunks) forwards, then
// one forward and one backward per steady iteration, then the remaining backwards. Each
// compute step is followed by one comm step posting every transfer that is due together
// (send the output / input gradient just made, receive the next forward's input / the next
// backward's output gradient), as Megatron-LM's send_forward_backward_recv_forward_backward.
// The bubble is 1F1B's divided by `chunks` for the price of `chunks` times the pipeline
// sends (schedule.cpp). Throws std::invalid_argument for stages < 2, chunks < 2 or
// micro_batches not a multiple of stages (the planner refuses those inputs first).
std::vector<PipeStep> interleaved_1f1b(int stages, int stage, int micro_batches, int chunks);
// The table of `kind` (one_f_one_b, zero_bubble_h1 or, with `chunks`, interleaved_1f1b).
std::vector<PipeStep> schedule_steps(PipeSchedule kind, int stages, int stage, int micro_batches, int chunks = 1);
// The virtual stage of `chunk` on `stage`: chunk * stages + stage.
int virtual_stage(int stages, int stage, int chunk);

// Most activations `stage` holds at once under one_f_one_b (forwards done whose backward has
// not run): min(stages - stage, micro_batches). Same argument checks as one_f_one_b.
int max_in_flight(int stages, int stage, int micro_batches);
// The same for any table: the most micro-batches whose forward ran and whose last backward
// pass (W when the table has kWeights steps, else B) has not; an activation slot of the model
// each. For zero_bubble_h1: min(stages, micro_batches).
int max_in_flight(const std::vector<PipeStep>& steps);
int max_in_flight(PipeSchedule kind, int stages, int stage, int micro_batches, int chunks = 1);
// The same counted for one model chunk's steps only: the activation slots that chunk needs.
// For interleaved_1f1b the stage's peak over all chunks is min(warm-up + 1, m * chunks)
// chunk-micro-batches, each holding 1/chunks of the stage's layers (schedule.cpp).
int max_in_flight(const std::vector<PipeStep>& steps, int chunk);

// True when a stage runs steps[i], a B pass, and the next step as one backward (Pass::kAll):
// its own W pass (same chunk and micro-batch) follows with nothing between them, as on
// zero_bubble_h1's first stage, which holds no W back, and it is not of the last of the
// `micro_batches` (that W pass stays apart: it reports the embedding's gradient before the
// blocks', so a tied embedding's sum leaves while they run, gpt_backward.cpp). One pass gives
// the same gradients bit for bit without what keeping a micro-batch's GEMM output gradients
// from B to W costs (docs/training.md, "What the split backward costs on a CPU").
bool joins_weights(const std::vector<PipeStep>& steps, size_t i, int micro_batches);

// Tag of the transfer of micro-batch `micro` in the direction of `kind` over the boundary
// whose lower side is model chunk `link` (link_chunk). A send and its matching recv get the
// same tag (kSendActivation and kRecvActivation agree, as do the two grad kinds);
// activations and grads, micro-batches and boundaries never share a tag, and every tag is
// below 2^30 (calibration.cpp's probe tag is above). Throws std::invalid_argument for micro
// outside [0, kMaxTaggedMicro] or link outside [0, kMaxTaggedChunk].
constexpr int kMaxTaggedMicro = 0x7fffff;
constexpr int kMaxTaggedChunk = 63;
uint32_t p2p_tag(P2PKind kind, int micro, int link = 0);
// The chunk on the lower side of the boundary transfer `t` of `stage` crosses (the sender of
// its activations): t.chunk, except on stage 0 toward the previous stage, where the boundary
// is the wrap-around from chunk t.chunk - 1 of the last stage. Both ends compute the same.
int link_chunk(int stage, const PipeTransfer& t);
uint32_t p2p_tag(int stage, const PipeTransfer& t);  // p2p_tag(t.kind, t.micro, link_chunk)

// The kind on the other side of a transfer: send activation <-> recv activation, etc.
P2PKind matching_kind(P2PKind kind);
// True for kSendActivation and kSendGrad.
bool is_send(P2PKind kind);

// "F3", "B0", "W0", "sA1" (one op) or "[sA1 rG0]" (one batch); steps and transfers of a
// chunk c > 0 carry ".c" ("F3.1", "sA1.1").
std::string to_string(const PipeStep& step);
// Human-readable table of all stages' steps, one line per stage:
//   "stage 0: F0 sA0 F1 [sA1 rG0] B0 ..."
std::string format_schedule(int stages, int micro_batches, PipeSchedule kind = PipeSchedule::k1f1b,
                            int chunks = 1);

}  // namespace holmes::schedule
