// Megatron-LM's distributed optimizer for one rank: the gradient buffer is cut into buckets
// of whole tensors in reverse layout order (the order backward finishes them). During the
// last micro-batch's backward each bucket whose gradients are final is reduce-scattered
// (sum, then / dp) beside the compute while backward goes on. A rank owns chunk dp_rank of
// every bucket (buckets padded to a multiple of dp), keeps AdamW moments only for what it
// owns, updates those parameters and all-gathers the bucket back. dp == 1: no buckets are
// communicated and the rank owns [0, n).
//
// The all-gathers run beside the next forward, in forward order (embedding first). The
// model's params-needed hook lands the buckets of each layer just before the layer's kernels
// read them and refreshes the bf16 copy of what landed. Anything else that reads or writes
// the parameters first calls params_ready(). How the bytes travel (a communication thread, a
// side queue, staging through host memory) is the data-parallel group's (group.hpp).
//
// The tied embedding: wte (first stage) and its copy (last stage) each get a bucket of
// their own, held back until their gradients are summed over the embedding group. That sum
// (Megatron's embedding group) runs beside the compute: each side posts it as soon as the
// model reports its share final in the step's last backward (a last stage after the head's
// weight gradient of its last micro-batch, a first stage after the embedding's, which a W pass
// runs before the blocks' W), and waits for it only where the sum is read: the first stage
// before the gradient norm's squares of wte (after every other unit's), the last stage, whose
// copy the norm does not count, in update() after the other buckets' AdamW. The two members'
// sum is a + b either way, so the bits are those of a sum at the end of backward. On a device
// group (which shares the side queue with the data-parallel reduce-scatters) it is queued in
// finish_grads(), behind them.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "engine/parallel/adamw.hpp"
#include "engine/parallel/groups.hpp"
#include "model/gpt.hpp"

namespace holmes::parallel {

// The global gradient norm is summed by unit, in unit order, so that it is the same number under
// every placement and partition: 0 wte, 1 wpe, 2 + l block l, 2 + L ln_f.
int norm_unit(const model::ParamTensor& t, int total_layers);
inline int norm_units(int total_layers) { return total_layers + 3; }

// One bucket: flat-buffer range [begin, end) and this rank's chunk of it.
struct GradBucket {
  size_t begin = 0, end = 0;
  size_t chunk = 0;                   // ceil((end - begin) / dp): floats per rank
  size_t own_begin = 0, own_end = 0;  // owned part, clipped to [begin, end) (may be empty)
  bool embedding = false;             // wte or its tied copy: waits for the embedding sum
};

// Buckets of >= bucket_floats (whole tensors of one block, or of wpe or ln_f; the last of each
// may be smaller) from the end of the layout to its start; the tied embedding (gpt2's wte,
// llama's embed_tokens with tie_embeddings) and its copy on the last stage are each a bucket
// of its own. Since no bucket spans two blocks, an element's bucket, its owner and the order in
// which the reduce-scatter sums it are the same under every pipeline partition.
std::vector<GradBucket> plan_buckets(const model::ParamLayout& layout, size_t bucket_floats, int dp_size,
                                     int dp_rank);

class DistOptimizer {
 public:
  // bucket_floats: the gradient bucket size (floats; the rank plan's, by default
  // schedule::kDefaultBucketFloats). gpt and groups outlive the optimizer.
  DistOptimizer(model::Gpt& gpt, ParallelGroups& groups, size_t bucket_floats);
  ~DistOptimizer();

  // Call before the step's last backward: from then on every bucket is reduce-scattered as
  // soon as the model reports its gradients final.
  void arm();
  // After the whole backward: the buckets not yet sent, then the wait for all of them (but a
  // tied embedding's, see the header). Afterwards the owned gradients are final (averaged over
  // dp), a tied embedding's once add_owned_grad_sq() (first stage) or update() (last) ran.
  void finish_grads();
  // Elastic sync replicas (HSDP, docs/elastic.md), after finish_grads(): the owned gradients
  // (the whole reduce-scatter output, or without dp the whole gradient buffer; a tied
  // embedding's sum landed first) summed over `outer` (one member per replica, at this rank's
  // coordinate) and divided by its size: the mean over every replica's data ranks. In the
  // compute order; a CommError leaves the moments and weights untouched. Nothing with one member.
  void average_over_replicas(Group& outer);
  // Sums of squares of the owned gradients by norm unit (norm_unit), added into by_unit
  // ([norm_units(L)]); each element of the global model is counted once over all ranks
  // (replicated TP tensors on tp_rank 0 only, tied copy skipped). Within a unit the order of
  // the sum depends on the unit alone, not on which other layers share the stage. The
  // backend sums (Kernels::sum_squares_forward), the host reads the units once.
  void add_owned_grad_sq(std::vector<double>& by_unit);
  // AdamW on the owned ranges (1-based step t, gradients times grad_scale), then the
  // all-gather that gives every dp rank the whole updated shard.
  void update(const AdamWHyper& h, int64_t t, float grad_scale);
  // Waits for the all-gathers update() left running: afterwards params() is the whole
  // updated shard (and its bf16 copy refreshed). Rethrows their failure.
  void params_ready();
  // Buckets whose all-gather the last forward waited for or found done, against all the
  // deferred ones (tests: 0 of 0 without deferral).
  int gathers_deferred() const { return gathers_deferred_; }

  // Sorted, disjoint, adjacent ranges merged; moments packed in that order.
  const std::vector<std::pair<size_t, size_t>>& owned() const { return owned_; }
  // Backend memory, [moment_floats()] each.
  float* exp_avg() { return m_.data(); }
  float* exp_avg_sq() { return v_.data(); }
  size_t moment_floats() const { return m_.size(); }
  const std::vector<GradBucket>& buckets() const { return buckets_; }
  // Buckets whose reduce-scatter the last step submitted while backward still ran.
  int overlapped() const { return overlapped_; }
  // Where the last step posted the sum of a tied embedding over the embedding group:
  // in_backward (from the model's tied-gradient hook; else in finish_grads) and `ahead`, the
  // floats of the other gradients that backward reported after the post (tests).
  struct TiedPost {
    bool posted = false, in_backward = false;
    size_t ahead = 0;
  };
  const TiedPost& tied_post() const { return tied_post_; }

 private:
  void on_grads_ready(size_t begin, size_t end);
  void on_tied_grad();
  void post_tied(bool in_backward);  // the tied embedding's sum over the embedding group
  void land_tied();  // waits for it; with dp, then reduce-scatters its bucket
  void submit(size_t k);  // bucket k's reduce-scatter
  void land_scattered(size_t k);  // waits for bucket k's reduce-scatter, then averages it
  const float* owned_grads(size_t k) const;
  void on_params_needed(size_t begin, size_t end);
  void land(size_t k);  // bucket k's deferred all-gather, then its bf16 copy

  model::Gpt& gpt_;
  ParallelGroups& groups_;
  const int dp_size_, dp_rank_, tp_rank_;
  std::vector<GradBucket> buckets_;
  std::vector<size_t> pack_off_;    // per bucket: where its owned part sits in m_, v_
  std::vector<size_t> reduced_off_;  // per bucket: its chunk in reduced_
  std::vector<std::vector<DecayRange>> decay_;  // per bucket, relative to own_begin
  struct NormRange {
    size_t bucket, begin, end;  // relative to the bucket's own_begin
    int unit;                   // norm_unit of its tensor
  };
  std::vector<NormRange> norm_;  // owned elements the global norm counts on this rank
  std::vector<std::pair<size_t, size_t>> owned_;
  // In the model's backend memory, as the model's own buffers.
  model::Backend& backend_;
  device::DeviceArray<float> m_, v_;
  device::DeviceArray<float> reduced_;  // reduce-scatter outputs, chunk per bucket
  device::DeviceArray<double> sq_;  // [norm_units] the norm's sums of squares by unit
  std::vector<Work> scattered_;     // per bucket: its reduce-scatter this step
  size_t next_ = 0;          // first bucket not yet submitted (reverse layout order)
  size_t ready_floor_ = 0;   // gradients at or above this offset are final
  bool armed_ = false;
  int overlapped_ = 0;
  bool dp_ = false;  // dp_size > 1: gradients are reduce-scattered, parameters all-gathered
  // The tied embedding (or its copy) summed over an embedding group of two, else null; its
  // bucket, whether the norm counts it (first stage), the sum in flight.
  const model::ParamTensor* tied_ = nullptr;
  size_t tied_bucket_ = 0;
  bool tied_counts_ = false;
  Work tied_sum_;
  TiedPost tied_post_;
  // Deferred all-gathers, landed in forward order (bucket index descending); gather_next_
  // counts the buckets landed, from the last index.
  std::vector<Work> gathered_;
  size_t gather_next_ = 0;
  bool gathering_ = false;
  int gathers_deferred_ = 0;
};

}  // namespace holmes::parallel
