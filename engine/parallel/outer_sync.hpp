// The outer synchronization of parallel.outer: diloco (DiLoCo, arXiv 2311.08105; Streaming
// DiLoCo, arXiv 2501.18512), on one rank.
//
// The rank's flat parameter buffer [size] (its tp x pp shard) is cut into `fragments`
// contiguous parts; fragment f is synced after the steps `done` with
// done % H == ((f + 1) H / F) % H, so with F = 1 every H steps, and F fragments are synced at
// evenly staggered steps. A sync of fragment [b, e) of n = e - b weights:
//   1. this data-parallel rank d takes its slice [b + d c, b + (d + 1) c) (c = ceil(n / dp),
//      the last slices shorter or empty) and forms the outer gradient
//      delta = anchor - params (anchor: the weights at the previous sync);
//   2. the owner-slice exchange over the outer group (this coordinate in every replica, over
//      Ethernet; N members, member k = replica k): the padded slice is cut into N parts of
//      p = ceil(c / N) values, member k owns part k. Each member encodes every part as
//      outer_dtype (fp32; bf16 round-to-nearest-even; int8 symmetric with one fp32 scale per
//      kOuterChunk values of the part) and sends part k to owner k (N - 1 part payloads, in
//      N - 1 pairwise rounds: round j to member + j, from member - j);
//   3. owner k decodes the N payloads of its part (its own without the wire) and sums them in
//      replica order, / N, encodes that average once and all-gathers it (N - 1 part payloads):
//      every replica decodes the same bytes, so holds the same bits, whatever the dtype.
//      Bytes a member sends: 2 (N - 1) part payloads (schedule::outer_exchange_bytes), about
//      2 (N - 1) / N of the slice's payload where an all-gather of whole payloads sends N - 1.
//      Error feedback (bf16, int8), at both roundings: each member adds to its outer gradient
//      what its previous payloads of this slice left out (`residual`), and each owner adds to
//      its part's average what its previous encoded average left out (`owner_residual`). So
//      over the syncs the updates every replica applies sum to the exact averages of the
//      outer gradients, less the two residuals still held (each below one rounding step);
//   4. Nesterov SGD as PyTorch's SGD(nesterov=True) on the decoded average g, on every
//      replica alike: m = mu m + g; anchor -= lr (g + mu m); params[slice] = anchor;
//   5. the data-parallel group all-gathers the slices, so the replica's copies agree again.
// Each replica keeps its own inner AdamW state.
//
// Overlap (parallel.outer_overlap = tau > 0; Streaming DiLoCo's tau, CO2): steps 1-2 run after
// step t as above, but the exchange (2-3) runs on the outer side group's communication thread
// while steps t + 1 .. t + tau train; after step t + tau the exchange lands, the Nesterov step
// (4) moves the anchor on every replica alike, and the slice becomes
//      params = anchor + (params - sent)
// (sent: the slice's weights at step t): the new shared anchor plus this replica's own
// progress since it sent. So the anchors are identical on every replica (bit for bit), the
// weights differ by the tau steps of local progress, which the next outer gradient (anchor -
// params) carries to the average: no step of any replica is lost or counted twice. With
// tau = 0 this is the synchronous sync (params - sent = 0). An exchange lands before the next
// one starts (tau < inner_steps / fragments). A checkpoint lands an exchange in flight (land())
// and stores its decoded average with `sent`, so a resume applies it at the same step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "engine/parallel/group.hpp"
#include "engine/parallel/outer_times.hpp"
#include "engine/schedule/outer_payload.hpp"
#include "engine/schedule/rank_plan.hpp"
#include "engine/spec/choices.hpp"

namespace holmes::parallel {

// H, F, the Nesterov step's lr and momentum, outer_dtype and tau: the rank plan's
// (engine/schedule/rank_plan.hpp).
using schedule::OuterConfig;

// The payload codec, public for tests. encode: n values -> schedule::outer_payload_size(dtype,
// n) bytes (engine/schedule/outer_payload.hpp); decode_add: out[i] += decoded[i] for the n
// values. Deterministic.
void outer_encode(spec::OuterDtype dtype, const float* x, size_t n, std::byte* out);
void outer_decode_add(spec::OuterDtype dtype, const std::byte* in, size_t n, float* out);

class OuterSync {
 public:
  // outer: this coordinate's group across replicas (rank = replica); dp: the replica's
  // data-parallel group; side (overlap > 0): the outer group's members on a communicator of
  // their own, carrying the exchange beside the steps. All outlive this. size: floats in the
  // shard buffer.
  OuterSync(const OuterConfig& config, Group& outer, Group& dp, size_t size, Group* side = nullptr);
  // Lands an exchange still in flight (its thread writes this object's buffers); a failure
  // there was or will be reported by the step that lands it.
  ~OuterSync();
  OuterSync(const OuterSync&) = delete;
  OuterSync& operator=(const OuterSync&) = delete;

  // The fragments synced after step `done` (1-based count of steps), in fragment order.
  std::vector<int> due(int64_t done) const;
  // Whether after_step(done) has anything to do: a fragment due, or an exchange to apply.
  bool busy(int64_t done) const { return !due(done).empty() || (pending_.f >= 0 && pending_.apply_at == done); }
  // The anchor <- params (the start, or a load without outer state); forgets an exchange in flight.
  void reset(const float* params);
  // After step `done` on `params` (host memory, [size]): applies the exchange that lands now
  // (overlap), then syncs (or, overlap, starts) the fragments due; returns how many were due.
  int after_step(int64_t done, float* params);
  // Waits for an exchange in flight (before a checkpoint); it is still applied at its step.
  void land();

  // An elastic job (docs/elastic.md) runs the synchronous sync (overlap 0) in two halves, so
  // that an exchange a replica failed in can be redone over the survivors: exchange_fragment
  // (steps 1-3: the outer gradient, the exchange; anchor, momentum and params untouched, only
  // the error-feedback residuals move), then, once every member completed it, apply_fragment
  // (steps 4-5). Residuals: what an exchange changes, to put back before it is redone.
  struct Residuals {
    std::vector<float> residual, owner_residual;
  };
  Residuals residuals() const { return {residual_, owner_residual_}; }
  void restore(const Residuals& r);
  void exchange_fragment(int f, const float* params);
  void apply_fragment(int f, float* params);
  // Takes over `old`'s state (anchor, momentum, payload residual, bytes sent) after the outer
  // group changed: the same data-parallel slices, so they carry over as they are; the owner
  // residuals start at zero, since the parts are cut anew for the new group size (with
  // bf16/int8 payloads what they held, below one rounding step of each owned value, is dropped
  // once; nothing with fp32). `old` has no exchange in flight (overlap 0).
  void adopt(const OuterSync& old);
  // The wall and CPU milliseconds of a sync run in halves (after_step counts its own).
  void count_time(double ms, double cpu_ms) { times_.total_ms += ms, times_.cpu_ms += cpu_ms; }

  // Fragment f's range in the buffer, and this rank's slice of it.
  std::pair<size_t, size_t> fragment(int f) const;
  std::pair<size_t, size_t> slice(int f) const;
  // Outer state for a checkpoint, state_floats() packed: anchor, momentum and payload rounding
  // residual of this rank's slices, the owner residual of the parts it owns, and with overlap
  // the exchange waiting to be applied: [0 or 1, fragment, apply step / 2^16, apply step %
  // 2^16], `sent` and the decoded average (max_slice() each). state() needs land() first.
  size_t state_floats() const {
    return 3 * anchor_.size() + owner_residual_.size() + (config_.overlap > 0 ? 4 + 2 * max_slice_ : 0);
  }
  std::vector<float> state() const;
  void load(std::span<const float> state);
  // Bytes this rank sent over the outer group so far (2 (N - 1) part payloads a sync).
  double bytes_sent() const { return bytes_sent_; }
  // Where the syncs since the last call spent their time (outer_times.hpp), and forgets them.
  // An exchange's parts on the communication thread count once it is applied.
  OuterTimes take_times() { return std::exchange(times_, OuterTimes{}); }
  // The exchanges applied so far over the wire (outer group of more than one member): their two
  // halves' wall time (to owners + all-gather, waits for the other members included), the bytes
  // this rank sent in them and how many; a calibration prices the exchange with their rate.
  struct Wire {
    double seconds = 0, bytes = 0;
    int exchanges = 0;
  };
  const Wire& wire() const { return wire_; }

 private:
  static constexpr uint32_t kOuterTag = 28;  // the exchange's point-to-point messages
  // 1. on this thread: the outer gradient of fragment f's slice, encoded part by part into wire_out_.
  void prepare(int f, const float* params);
  // 2-3. the owner-slice exchange of what prepare() encoded (pg null: one member); the decoded
  // average lands in average_. On the communication thread of the group that carries it.
  void exchange(comm::ProcessGroup* pg);
  // 4-5. Nesterov on the anchor; params[slice] = anchor (+ params - sent, overlap); dp all-gather.
  void apply(int f, float* params, const float* sent);
  double take_exchange();  // the exchange's parts into times_ and wire_ once it landed; its ms
  size_t padded(int f) const;  // c: the slice length every data-parallel rank pads to
  size_t part(int f) const;    // p: one owner's part of the padded slice

  OuterConfig config_;
  Group& outer_;
  Group& dp_;
  Group* side_;
  size_t size_;
  int n_ = 1, me_ = 0;                  // outer group size and rank
  std::vector<size_t> packed_;          // per fragment: offset of its slice in anchor_
  std::vector<size_t> owned_at_;        // per fragment: offset of its owned part in owner_residual_
  size_t max_slice_ = 0;                // the longest slice of a fragment
  std::vector<float> anchor_, momentum_;
  // Error feedback (bf16, int8): what the payload's rounding left out of this rank's outer
  // gradient, added to the next one of the same slice (0 with fp32).
  std::vector<float> residual_;
  // The owner's error feedback: what its encoded average of each owned part left out.
  std::vector<float> owner_residual_;
  // The exchange in flight or waiting to be applied (overlap): fragment (-1: none), the step
  // after which it is applied, the slice's weights when it was sent.
  struct Pending {
    int f = -1;
    int64_t apply_at = 0;
    std::vector<float> sent;
    Work work;
  } pending_;
  // The exchange's buffers (prepare -> exchange -> apply; one exchange at a time).
  int cur_f_ = 0;
  size_t cur_p_ = 0, cur_words_ = 0;
  std::vector<float> own_, delta_, sum_, average_, gathered_slice_;
  std::vector<float> wire_in_, wire_out_, mine_, gathered_;  // payloads as 4-byte words
  double bytes_sent_ = 0;
  OuterTimes times_;     // since take_times(), on the training thread
  OuterTimes exchange_;  // the parts of the exchange in flight, written by the thread running it
  Wire wire_;
};

}  // namespace holmes::parallel
