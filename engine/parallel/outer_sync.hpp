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
//      kOuterChunk values of the part) and sends part k to owner k (N - 1 part payloads);
//   3. owner k decodes the N payloads of its part (its own without the wire) and sums them in
//      replica order, / N, encodes that average once and all-gathers it (N - 1 part payloads):
//      every replica decodes the same bytes, so holds the same bits, whatever the dtype.
//      Bytes a member sends: 2 (N - 1) part payloads (plan::outer_exchange_bytes), about
//      2 (N - 1) / N of the slice's payload where an all-gather of whole payloads sends N - 1.
//      Error feedback (bf16, int8), at both roundings: each member adds to its outer gradient
//      what its previous payloads of this slice left out (`residual`), and each owner adds to
//      its part's average what its previous encoded average left out (`owner_residual`). So
//      over the syncs the updates every replica applies sum to the exact averages of the
//      outer gradients, less the two residuals still held (each below one rounding step);
//   4. Nesterov SGD as PyTorch's SGD(nesterov=True) on the decoded average g, on every
//      replica alike: m = mu m + g; anchor -= lr (g + mu m); params[slice] = anchor;
//   5. the data-parallel group all-gathers the slices, so the replica's copies agree again.
// Each replica keeps its own inner AdamW state. The exchange is synchronous: it runs after
// the step's optimizer update and the next step starts once it is done (not overlapped).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/parallel/group.hpp"
#include "engine/spec/choices.hpp"

namespace holmes::parallel {

struct OuterConfig {
  int inner_steps = 20;  // H
  int fragments = 1;     // F
  double lr = 0.7, momentum = 0.9;
  spec::OuterDtype dtype = spec::OuterDtype::kFp32;
};

// The payload codec, public for tests. encode: n values -> bytes (a multiple of 4);
// decode_add: out[i] += decoded[i] for the n values. Deterministic.
size_t outer_payload_size(spec::OuterDtype dtype, size_t n);  // bytes, a multiple of 4
void outer_encode(spec::OuterDtype dtype, const float* x, size_t n, std::byte* out);
void outer_decode_add(spec::OuterDtype dtype, const std::byte* in, size_t n, float* out);

class OuterSync {
 public:
  // outer: this coordinate's group across replicas (rank = replica); dp: the replica's
  // data-parallel group. Both outlive this. size: floats in the shard buffer.
  OuterSync(const OuterConfig& config, Group& outer, Group& dp, size_t size);

  // The fragments synced after step `done` (1-based count of steps), in fragment order.
  std::vector<int> due(int64_t done) const;
  // The anchor <- params (the start, or a load without outer state).
  void reset(const float* params);
  // Syncs the fragments due after `done` on `params` (host memory, [size]); returns how many.
  int after_step(int64_t done, float* params);

  // Fragment f's range in the buffer, and this rank's slice of it.
  std::pair<size_t, size_t> fragment(int f) const;
  std::pair<size_t, size_t> slice(int f) const;
  // Outer state for a checkpoint, state_floats() packed: anchor, momentum and payload rounding
  // residual of this rank's slices, then the owner residual of the parts it owns.
  size_t state_floats() const { return 3 * anchor_.size() + owner_residual_.size(); }
  std::vector<float> state() const;
  void load(std::span<const float> state);
  // Bytes this rank sent over the outer group so far (2 (N - 1) part payloads a sync).
  double bytes_sent() const { return bytes_sent_; }

 private:
  static constexpr uint32_t kOuterTag = 28;  // the exchange's point-to-point messages
  void sync_fragment(int f, float* params);
  size_t padded(int f) const;  // c: the slice length every data-parallel rank pads to
  size_t part(int f) const;    // p: one owner's part of the padded slice

  OuterConfig config_;
  Group& outer_;
  Group& dp_;
  size_t size_;
  std::vector<size_t> packed_;          // per fragment: offset of its slice in anchor_
  std::vector<size_t> owned_at_;        // per fragment: offset of its owned part in owner_residual_
  std::vector<float> anchor_, momentum_;
  // Error feedback (bf16, int8): what the payload's rounding left out of this rank's outer
  // gradient, added to the next one of the same slice (0 with fp32).
  std::vector<float> residual_;
  // The owner's error feedback: what its encoded average of each owned part left out.
  std::vector<float> owner_residual_;
  std::vector<float> own_;
  std::vector<float> delta_, sum_, average_, gathered_slice_;
  std::vector<float> wire_in_, wire_out_;  // payloads as 4-byte words
  double bytes_sent_ = 0;
};

}  // namespace holmes::parallel
