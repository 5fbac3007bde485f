#include "engine/plan/cost_model.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>

#include "engine/schedule/schedule.hpp"
#include "engine/schedule/timing.hpp"
#include "engine/plan/partition.hpp"

namespace holmes::plan {

namespace {

// Keep the slower of two links; a link with no bandwidth (a one-member group) costs nothing
// and never wins.
void keep_worse(LinkCost& worst, const LinkCost& l) {
  bool crosses = worst.crosses_island || l.crosses_island;
  if (l.gbps_per_rank > 0 &&
      (worst.gbps_per_rank <= 0 || l.gbps_per_rank < worst.gbps_per_rank ||
       (l.gbps_per_rank == worst.gbps_per_rank && l.latency_s > worst.latency_s)))
    worst = l;
  worst.crosses_island = crosses;
}

// sum += weight x one group's shares (a stage's groups of one kind, each `weight` of them).
void add_shares(LinkShares& sum, const LinkShares& group, double weight) {
  for (int k = 0; k < kLinkKinds; ++k) sum[k] += weight * group[k];
}

}  // namespace

const char* to_string(ComputeSource s) {
  switch (s) {
    case ComputeSource::kDeclared: return "declared";
    case ComputeSource::kJob: return "measured in a job";
    case ComputeSource::kTable: return "measured (calibrate table)";
    case ComputeSource::kTableInterpolated: return "measured (calibrate table, micro-batch interpolated)";
    case ComputeSource::kGemms: return "measured (the table's GEMMs, analytic)";
  }
  return "?";
}

double ethernet_transfer_s(Transport t, double bytes, const LinkCost& link) {
  const double copies = t == Transport::kGlooTcp ? 2 * bytes / (kHostCopyGBps * 1e9) : 0;
  return link.transfer_s(bytes) + copies;
}

std::vector<StageCost> stage_costs(const Facts& f, const DeviceTable& d, const Layout& lay) {
  const RankGrid& g = lay.grid;
  int tp = g.degree(Axis::kTp), pp = g.degree(Axis::kPp), dp = g.degree(Axis::kDp);
  auto node = [&](int t, int s, int r) { return d.node_of[lay.rank(Coords{t, s, r})]; };
  std::vector<StageCost> out(pp);
  std::vector<int> ring;
  // Every group of each kind by its members' nodes: whether each pipeline runs on Ethernet
  // (its hops share that transport) and how many ranks of a node use its ports at once in
  // each kind of group (NicUse).
  std::vector<std::vector<int>> pipes, tps, dps, embs;
  for (int r = 0; r < dp; ++r)
    for (int t = 0; t < tp; ++t) {
      pipes.emplace_back();
      for (int q = 0; q < pp; ++q) pipes.back().push_back(node(t, q, r));
      if (pp > 1) embs.push_back({node(t, 0, r), node(t, pp - 1, r)});
    }
  for (int q = 0; q < pp; ++q) {
    for (int r = 0; r < dp; ++r) {
      tps.emplace_back();
      for (int t = 0; t < tp; ++t) tps.back().push_back(node(t, q, r));
    }
    for (int t = 0; t < tp; ++t) {
      dps.emplace_back();
      for (int r = 0; r < dp; ++r) dps.back().push_back(node(t, q, r));
    }
  }
  const bool own_links = pipelines_on_own_links(f);
  std::vector<char> pp_ethernet(pipes.size());
  for (size_t i = 0; i < pipes.size(); ++i) pp_ethernet[i] = !own_links && group_on_ethernet(f, pipes[i], false);
  const NicUse pp_use = nic_use(f, pipes, false, own_links), tp_use = nic_use(f, tps, true), dp_use = nic_use(f, dps, true),
               emb_use = nic_use(f, embs, false);
  const NicUse tp_span_use = span_use(f, tps), dp_span_use = span_use(f, dps);
  for (int s = 0; s < pp; ++s) {
    StageCost& sc = out[s];
    sc.stage = s;
    sc.first = s == 0;
    sc.last = s == pp - 1;
    sc.tp = tp;
    sc.dp = dp;
    sc.tflops = -1;
    sc.update_s_per_param = f.update_s_per_param;
    sc.update_from_table = f.update_from_table;
    sc.host_s_per_step = f.host_s_per_step;
    StageEmulationBuilder emu(tp);
    bool every_table = true;
    const double one_send = 1.0 / (double(tp) * dp);  // of the stage's ranks' sends over a path hop
    for (int r = 0; r < dp; ++r) {
      ring.clear();
      for (int t = 0; t < tp; ++t) {
        int n = node(t, s, r);
        const bool pp_on_ethernet = pp_ethernet[static_cast<size_t>(r) * tp + t];
        ring.push_back(n);
        const NodeFacts& nf = f.nodes[n];
        if (sc.tflops < 0 || nf.tflops < sc.tflops) sc.tflops = nf.tflops, sc.tflops_calibrated = nf.tflops_calibrated;
        every_table = every_table && nf.table;
        if (nf.table && std::find(sc.tables.begin(), sc.tables.end(), nf.table) == sc.tables.end())
          sc.tables.push_back(nf.table);
        emu.add(nf.emu);
        double cap = nf.memory_bytes * kUsableMemoryFraction;
        if (cap > 0 && (sc.capacity <= 0 || cap < sc.capacity)) sc.capacity = cap;
        // Each hop's link, kept where it is the slowest, and its class for the bytes.
        auto hop = [&](LinkCost& worst, LinkShares& kinds, const LinkCost& l) {
          keep_worse(worst, l);
          kinds[static_cast<int>(l.kind)] += one_send;
        };
        if (s + 1 < pp) hop(sc.next_link, sc.sends.next, link_between(f, n, node(t, s + 1, r), pp_on_ethernet, &pp_use));
        if (s > 0) hop(sc.prev_link, sc.sends.prev, link_between(f, n, node(t, s - 1, r), pp_on_ethernet, &pp_use));
        if (pp > 1 && (sc.first || sc.last))
          hop(sc.emb_link, sc.sends.emb, link_between(f, n, node(t, pp - 1 - s, r), false, &emb_use));
      }
      if (tp > 1) keep_worse(sc.tp_link, ring_bottleneck(f, ring, &tp_use));
      add_shares(sc.sends.tp, ring_shares(f, ring), 1.0 / dp);
      if (tp > 1 && r == 0) sc.tp_span = group_span(f, ring, &tp_span_use);
    }
    sc.emu = emu.finish();
    if (!every_table) sc.tables.clear();
    if (dp > 1)
      for (int t = 0; t < tp; ++t) {
        ring.clear();
        for (int r = 0; r < dp; ++r) ring.push_back(node(t, s, r));
        keep_worse(sc.dp_link, ring_bottleneck(f, ring, &dp_use));
        add_shares(sc.sends.dp, ring_shares(f, ring), 1.0 / tp);
        if (t == 0) sc.dp_span = group_span(f, ring, &dp_span_use);
      }
  }
  share_sends_at_quota(out);
  return out;
}

int in_flight_micro_batches(spec::Schedule schedule, int micro_batches, int pipeline, int stage) {
  return schedule == spec::Schedule::kZbH1 ? std::min(micro_batches, pipeline) : std::min(micro_batches, pipeline - stage);
}

std::vector<int> chunk_slots(int micro_batches, int pipeline, int stage, int chunks) {
  const std::vector<schedule::PipeStep> steps = schedule::interleaved_1f1b(pipeline, stage, micro_batches, chunks);
  std::vector<int> out(chunks);
  for (int c = 0; c < chunks; ++c) out[c] = schedule::max_in_flight(steps, c);
  return out;
}

std::pair<const LinkCost*, int> StageCost::hop_next(int chunks) const {
  if (!last) return {&next_link, chunks};
  return chunks > 1 ? std::pair{&emb_link, chunks - 1} : std::pair<const LinkCost*, int>{nullptr, 0};
}

std::pair<const LinkCost*, int> StageCost::hop_prev(int chunks) const {
  if (!first) return {&prev_link, chunks};
  return chunks > 1 ? std::pair{&emb_link, chunks - 1} : std::pair<const LinkCost*, int>{nullptr, 0};
}

double StageCost::params_per_rank(const Workload& w, int layers) const {
  const model::GptConfig& m = w.shape;
  double p = double(layers) * double(block_params(m));
  if (first) p += double(embedding_params(m, tp));
  if (last) p += double(final_norm_params(m)) + double(untied_head_params(m, tp));
  if (last && !first && m.tie_embeddings) p += double(padded_vocab(m.vocab, tp)) * m.hidden;  // tied LM head copy
  return p / tp;
}

double StageCost::fp8_train_s(const Workload& w, int layers, double tokens) const {
  const model::GptConfig& m = w.shape;
  const double rate = tflops * 1e12;
  const model::BlockCounts b = model::block_counts(m.shard(tp, 0));
  // Per token on this tensor-parallel rank: the GEMMs' training FLOPs (forward, input and
  // weight gradients: 3 x 2 per weight) and the values their operands cast (the input forward
  // and again for the weight gradient, the output's gradient backward); per micro-batch the
  // weights, cast for the forward and again for the backward.
  double gemm_flops = layers * 6.0 * double(b.gemm_weights);
  double act_values = layers * double(2 * b.gemm_in_channels + b.gemm_out_channels);
  double weight_values = layers * 2.0 * double(b.gemm_weights);
  if (last && w.fp8_lm_head) {
    const double vl = double(padded_vocab(m.vocab, tp)) / tp;
    gemm_flops += 6.0 * m.hidden * vl;
    act_values += 2.0 * m.hidden + vl;
    weight_values += 2.0 * m.hidden * vl;
  }
  const double all_s = stage_train_flops(m, layers, last, tp, w.seq_len, tokens) / rate;
  const double gemm_s = gemm_flops * tokens / rate;
  return all_s - gemm_s + gemm_s / kFp8GemmRateFactor +
         (act_values * tokens + weight_values) * w.operand_cast_s_per_value;
}

StageTime StageCost::time(const Workload& w, int layers) const {
  const model::GptConfig& m = w.shape;
  double tokens = double(w.micro_batch) * w.seq_len;
  StageTime t;
  // The calibrate tables of the stage's devices, where they hold this model's passes at its
  // slice (the slowest device model's); else the FLOPs at the declared or job-calibrated rate.
  // No table measures FP8 GEMMs yet: an FP8 plan takes the analytic form.
  std::optional<MeasuredPasses> measured;
  if (!w.fp8_gemms)
    for (const topo::ComputeTable* table : tables) {
      auto p = measured_passes(*table, m, tp, w.micro_batch, w.seq_len, w.activation.recompute, layers, first, last,
                               w.act_bytes());
      if (!p) {
        measured.reset();
        break;
      }
      if (!measured || p->forward_s + p->backward_all_s > measured->forward_s + measured->backward_all_s)
        measured = p;
    }
  if (measured) {
    t.forward_s = measured->forward_s;
    t.recompute_s = measured->replay_s;
    t.weights_s = w.activation.split_backward ? measured->weights_s : 0.0;
    t.compute_s = measured->forward_s +
                  (w.activation.split_backward ? measured->backward_s + measured->weights_s : measured->backward_all_s);
    t.compute_source = measured->source == "table"                ? ComputeSource::kTable
                       : measured->source == "GEMMs of the table" ? ComputeSource::kGemms
                                                                  : ComputeSource::kTableInterpolated;
  } else {
    const double bf16_train_s = stage_train_flops(m, layers, last, tp, w.seq_len, tokens) / (tflops * 1e12);
    // FP8 GEMMs: the passes' time scaled by what they save, the replays and W passes (mostly
    // GEMMs) alike.
    const double fp8 = w.fp8_gemms ? fp8_train_s(w, layers, tokens) / bf16_train_s : 1.0;
    t.recompute_s = fp8 * layers * recompute_flops_per_token(m, w.seq_len, tp, w.act_bytes(), w.activation) *
                    tokens / (tflops * 1e12);
    const double train_s = fp8 * bf16_train_s;
    t.compute_s = train_s + t.recompute_s;
    t.forward_s = train_s / 3;  // the forward's FLOPs are a third of training's; replays run in B and W
    // zb-h1: the W passes (and a full replay's second run before them) are what moves.
    if (w.activation.split_backward)
      t.weights_s = fp8 * stage_weight_grad_flops(m, layers, last, tp, w.seq_len, tokens) / (tflops * 1e12) +
                    t.recompute_s / 2;
    t.compute_source = tflops_calibrated ? ComputeSource::kJob : ComputeSource::kDeclared;
  }
  // Activation tensor [B, T, C] that pipeline sends carry (boundary_bytes: FP8 with
  // parallel.pipe_fp8); tensor-parallel all-reduces carry tp_wire_bytes (fp32 when Gloo sums them).
  double act = tokens * m.hidden * w.boundary_bytes();
  int all_reduces = model::block_counts(m).tp_sums * layers + (first ? 1 : 0) + (last ? 1 : 0);
  const double tp_act = tokens * m.hidden * w.tp_wire_bytes();
  // Staged through host memory: each transfer's bytes go down and back up (two host copies).
  const bool staged = w.staging == Workload::Staging::kAll;
  auto copies_s = [&](double bytes) { return staged ? 2 * bytes / (kHostCopyGBps * 1e9) : 0.0; };
  if (tp > 1)
    t.tp_s = all_reduces * (group_all_reduce_s(tp_link, tp_span, tp, tp_act) + copies_s(tokens * m.hidden * w.act_bytes()));
  // Pipeline sends are split over the tensor ranks (scatter/gather), forward and backward.
  auto send_s = [&](const LinkCost& link, double bytes) {
    if (w.staging != Workload::Staging::kNone && link.kind == LinkKind::kEthernet && link.gbps_per_rank > 0)
      return ethernet_transfer_s(Transport::kGlooTcp, bytes, link);
    return link.transfer_s(bytes) + copies_s(bytes);
  };
  // Interleaved: a micro-batch crosses each boundary of the stage once per chunk, and the
  // wrap-around hop between chunks (hop_next / hop_prev).
  const int v = w.activation.chunks;
  t.chunks = v;
  // Host emulation: a send's bytes move at the part of the wall time both ends run
  // (send_at_share_s; next_share and prev_share are 1 on stages without it).
  auto hop_s = [&](const LinkCost& link, double bytes, double share) {
    return send_at_share_s(link, send_s(link, bytes), share);
  };
  const auto [next, n_next] = hop_next(v);
  const auto [prev, n_prev] = hop_prev(v);
  if (next) t.send_next_s = n_next * hop_s(*next, act / tp, emu.next_share);
  if (prev) t.send_prev_s = n_prev * hop_s(*prev, act / tp, emu.prev_share);
  t.pp_s = t.send_next_s + t.send_prev_s;
  t.sends_share_port = next && prev && next->kind == prev->kind && next->kind != LinkKind::kIntraNode;
  // FP8 sends: each hop's activation packed here and unpacked there, its gradient the other
  // way: a pack and an unpack per value and direction, on the stages' compute.
  if (w.pipe_fp8) {
    t.compute_s += (n_next + n_prev) * tokens * m.hidden * w.cast_s_per_value;
  }
  double params = params_per_rank(w, layers);
  // The optimizer per parameter held, and the rank's other host work per step (calibrated).
  t.update_s = params * update_s_per_param + host_s_per_step;
  double rs = 0, ag = 0;
  if (dp > 1) {
    rs = group_reduce_scatter_s(dp_link, dp_span, dp, params * w.grad_bytes()) + copies_s(params * w.grad_bytes());
    ag = group_all_gather_s(dp_link, dp_span, dp, params * w.gather_bytes()) + copies_s(params * w.gather_bytes());
  }
  // Reduce-scatter hides behind the last micro-batch's backward (2/3 of compute); the
  // parameter all-gather behind the next step's first forward (1/3), layer by layer
  // (DistOptimizer::update and the model's params-needed hook). In 1F1B stage s also waits
  // s micro-batch slots at both ends of a step: its last backward ends s backward slots before
  // stage 0's (the step ends when every stage's sums are in, at the norm's all-reduce), and
  // the next step's first activation reaches it s forward slots after stage 0 starts. Its
  // sync hides in those waits too.
  //
  // Host emulation: under a CPU quota the node's cgroup runs only its share of the wall time
  // while it computes; the communication thread, which must run at every ring step, is
  // throttled with it, so compute covers the sync only at that share (emu.cpu_share, 1 without
  // a quota). The waits are idle: they cover it whole.
  //
  // zb-h1 (split backward) holds W passes back into the drain: a bucket is final only in the
  // last W pass, which alone covers the reduce-scatter (at the quota's share), and stage s's
  // held-back W's run while the last gradient's B passes cross the stages before it, so it
  // idles only s (B - min(F, B, W)) at the end (StageTime::drain_wait_s; the tables' timing
  // with free links, as bubble_s). The start's wait (the first forward) is 1F1B's.
  const double waits = stage * t.fill_slot_s() / v;  // interleaved: chunk slots
  const double covering = t.compute_s * emu.cpu_share;
  const double end_cover = w.activation.split_backward
                               ? t.weights_s * emu.cpu_share + stage * t.drain_wait_s()
                               : (covering + waits) * 2.0 / 3.0;
  t.rs_exposed_s = std::max(0.0, rs - end_cover);
  t.ag_exposed_s = std::max(0.0, ag - (covering + waits) / 3.0);
  // The embedding group's sum of the tied head runs beside the compute (DistOptimizer): each
  // end posts its share when it is final. The last stage posts after its last head W and
  // reads the sum only in the update, after the norm's all-reduce, which waits for the first
  // stage anyway: it exposes nothing of its own. The first stage posts after its last
  // embedding W (zb-h1: before that pass's blocks' W, which then cover it at the quota's
  // share; 1f1b, interleaved: at the end of its last backward) and reads the sum for the
  // norm; it flies beside the reduce-scatter's exposed tail (another group), so only what
  // outlasts both is exposed.
  if (first && !last && m.tie_embeddings) {
    const double tied = double(padded_vocab(m.vocab, tp)) * m.hidden / tp * w.grad_bytes();
    const double cover = (w.activation.split_backward ? t.weights_s * emu.cpu_share : 0.0) + t.rs_exposed_s;
    t.tied_s = std::max(0.0, ring_all_reduce_s(emb_link, 2, tied) - cover);
  }
  t.dp_s = t.rs_exposed_s + t.ag_exposed_s + t.tied_s;
  set_bursts(*this, t);
  return t;
}

double StageTime::bubble_s(int p) const {
  const double slot = fill_slot_s();
  const double idle = (p - 1) * std::max(0.0, slot - weights_s - weights_hidden_s()) / chunks;
  return idle - burst_saving_s(*this, idle, p);
}

double pipelined_s(const StageTime& t, int micro_batches, int pipeline) {
  const double fill = 2.0 * (pipeline - 1) * std::max(t.send_next_s, t.send_prev_s);
  return micro_batches * t.per_micro_batch() + t.bubble_s(pipeline) + fill;
}

double StageCost::objective(const Workload& w, int pipeline, int layers) const {
  StageTime t = time(w, layers);
  return pipelined_s(t, w.micro_batches, pipeline) + t.dp_s + t.update_s;
}

std::vector<int> StageCost::chunk_cut(const Workload& w, int layers) const {
  const int v = std::max(1, w.activation.chunks);
  if (v == 1 || layers < v) return v == 1 ? std::vector<int>{layers} : uniform_partition(layers, v);
  const model::GptConfig& m = w.shape;
  const double tokens = double(w.micro_batch) * w.seq_len;
  const double layer = stage_train_flops(m, 1, false, tp, w.seq_len, tokens) +
                       recompute_flops_per_token(m, w.seq_len, tp, w.act_bytes(), w.activation) * tokens;
  const double head = last ? stage_train_flops(m, 0, true, tp, w.seq_len, tokens) : 0.0;
  return balanced_partition(layers, v, [&](int c, int n) { return n * layer + (c == v - 1 ? head : 0.0); });
}

RankMemory StageCost::memory(const Workload& w, int pipeline, int layers) const {
  double p = params_per_rank(w, layers);
  RankMemory mem;
  mem.params = p * w.param_bytes();
  mem.grads = p * w.grad_bytes();
  mem.optimizer = p * w.optimizer_bytes(dp) / dp;
  // The in-flight micro-batches' activations; the replayed buffers of recomputation exist once.
  const int a = w.act_bytes();
  const double block = block_activation_bytes(w.shape, w.seq_len, w.micro_batch, tp, a, w.activation);
  auto extra = [&](bool has_embedding, bool has_head) {
    return stage_extra_activation_bytes(w.shape, w.seq_len, w.micro_batch, tp, a, w.activation, has_embedding,
                                        has_head);
  };
  if (w.activation.schedule == spec::Schedule::kInterleaved) {
    // Each chunk is a model of its own: its slots hold its layers (chunk_cut, as plan.cpp
    // fill_chunks cuts it) and its own input and boundary copy; the embedding sits in chunk 0
    // of the first stage, the head in the last chunk of the last stage.
    const int v = w.activation.chunks;
    const std::vector<int> slots = chunk_slots(w.micro_batches, pipeline, stage, v);
    const std::vector<int> cut = chunk_cut(w, layers);
    for (int c = 0; c < v; ++c)
      mem.activations += slots[c] * (cut[c] * block + extra(first && c == 0, last && c == v - 1));
  } else {
    mem.activations = in_flight_micro_batches(w.activation.schedule, w.micro_batches, pipeline, stage) *
                      (layers * block + extra(first, last));
  }
  if (layers > 0)
    mem.activations += recompute_work_bytes(w.shape, w.seq_len, w.micro_batch, tp, a, w.activation) +
                       document_bias_bytes(w.seq_len, w.micro_batch, a, w.activation);
  mem.runtime = w.runtime_bytes;
  mem.capacity = capacity;
  return mem;
}

namespace {

// The stages are coupled by the pipeline: every stage's passes end with the drain (stage 0's
// last backward ends after the bottleneck's), so a stage's exposed sync and update start
// from the pipeline's end, not from its own (shorter) pipelined time. The step is the
// slowest stage's pipelined part, then the slowest reduce-scatter (and tied sum) to the
// norm's all-reduce, the slowest update, and the slowest all-gather before the next step's
// first forward reaches its stage (each net of the waits its own stage has at that end).
// `at(s)` is stage s's StageTime. The stages that set each maximum are in `max_of` (-1: none).
struct Coupled {
  int bottleneck = 0;
  double fill = 0, sync_rs = 0, sync_ag = 0, update = 0;
  int max_of[4] = {0, -1, -1, -1};  // pipelined part, reduce-scatter + tied, all-gather, update
  double step_s = 0;                // without the log exchange
};

template <class At>
Coupled couple(int p, int m, const At& at) {
  Coupled c;
  double worst = -1;
  for (int s = 0; s < p; ++s) {
    const StageTime& ts = at(s);
    c.fill += ts.pp_fill_s();
    const double f = pipelined_s(ts, m, p), rs = ts.rs_exposed_s + ts.tied_s;
    if (f > worst) worst = f, c.bottleneck = s;
    if (rs > c.sync_rs) c.sync_rs = rs, c.max_of[1] = s;
    if (ts.ag_exposed_s > c.sync_ag) c.sync_ag = ts.ag_exposed_s, c.max_of[2] = s;
    if (ts.update_s > c.update) c.update = ts.update_s, c.max_of[3] = s;
  }
  c.max_of[0] = c.bottleneck;
  const StageTime& b = at(c.bottleneck);
  // The bottleneck's slots and bubble; the fill and drain: every hop once each way.
  c.step_s = m * b.per_micro_batch() + b.bubble_s(p) + c.fill + c.sync_rs + c.sync_ag + c.update;
  return c;
}

}  // namespace

namespace {

// What a stage adds to the coupled step (couple, above) with a given layer count: its
// pipelined part (which picks the bottleneck) and that part without its own fill and drain
// (what the bottleneck adds: estimate_step counts every hop's fill instead), its exposed
// reduce-scatter (and tied sum), all-gather and update.
struct Terms {
  double pipe = 0, net = 0, rs = 0, ag = 0, update = 0;
};

Terms terms_of(const StageTime& t, int m, int p) {
  const double pipe = pipelined_s(t, m, p);
  return {pipe, pipe - 2.0 * (p - 1) * std::max(t.send_next_s, t.send_prev_s), t.rs_exposed_s + t.tied_s,
          t.ag_exposed_s, t.update_s};
}

// The three largest values of one term over the stages (ties: lower stage first), so that the
// maximum without any two stages is at hand: a move changes two stages.
struct Top3 {
  std::pair<double, int> v[3] = {{-1, -1}, {-1, -1}, {-1, -1}};
  void add(double value, int stage) {
    for (int i = 0; i < 3; ++i)
      if (v[i].second < 0 || value > v[i].first) {
        for (int j = 2; j > i; --j) v[j] = v[j - 1];
        v[i] = {value, stage};
        return;
      }
  }
  std::pair<double, int> without(int a, int b) const {
    for (const auto& x : v)
      if (x.second >= 0 && x.second != a && x.second != b) return x;
    return {-1, -1};
  }
};

}  // namespace

std::vector<int> coupled_partition(const Workload& w, const std::vector<StageCost>& stages, std::vector<int> start,
                                   int min_layers) {
  const int p = static_cast<int>(stages.size()), m = w.micro_batches;
  if (p < 2) return start;
  const int layers = std::accumulate(start.begin(), start.end(), 0);
  // Each stage's terms by layer count, computed once each.
  std::vector<std::map<int, Terms>> memo(p);
  auto at = [&](int s, int n) -> const Terms& {
    auto it = memo[s].find(n);
    if (it == memo[s].end()) it = memo[s].emplace(n, terms_of(stages[s].time(w, n), m, p)).first;
    return it->second;
  };
  double fill = 0;  // every hop once each way: the same whatever the layers
  for (int s = 0; s < p; ++s) fill += stages[s].time(w, start[s]).pp_fill_s();
  // Each stage's memory by layer count, as a share of its devices' (its bytes where their
  // size is unknown), computed once each; `over` is the share beyond them (0 where it fits).
  std::vector<std::map<int, std::pair<double, bool>>> memo_share(p);
  auto share = [&](int s, int n) -> const std::pair<double, bool>& {
    auto it = memo_share[s].find(n);
    if (it == memo_share[s].end()) {
      const RankMemory mem = stages[s].memory(w, p, n);
      const bool known = mem.capacity > 0;
      it = memo_share[s].emplace(n, std::pair{known ? mem.total() / mem.capacity : mem.total(), known}).first;
    }
    return it->second;
  };
  auto over = [&](int s, int n) {
    const auto& [used, known] = share(s, n);
    return known ? std::max(0.0, used - 1) : 0.0;
  };
  // Steepest descent by single-layer moves. A sum of maxima drops only when one of them does,
  // which takes a layer from the stage that sets it: those are the donors. A move is priced
  // in O(1) from the other stages' top three of each term. Out of memory, a move is first
  // judged by what it takes off the overflow (any stage may give then); in memory, no move
  // leaves it.
  using Score = std::pair<double, double>;  // (memory beyond the devices', summed; the step)
  auto descend = [&](std::vector<int> n) {
    Score now{0, 0};
    for (int moves = 0; moves <= layers; ++moves) {
      Top3 top[4];  // pipelined part, reduce-scatter + tied, all-gather, update
      double overflow = 0;
      for (int s = p - 1; s >= 0; --s) {  // from the last: ties keep the lower stage first
        const Terms& t = at(s, n[s]);
        top[0].add(t.pipe, s), top[1].add(t.rs, s), top[2].add(t.ag, s), top[3].add(t.update, s);
        overflow += over(s, n[s]);
      }
      auto step = [&](int d, const Terms& td, int r, const Terms& tr) {
        std::pair<double, int> b = top[0].without(d, r);  // the bottleneck: largest, lower stage on ties
        double net = b.second >= 0 ? at(b.second, n[b.second]).net : 0;
        for (const auto& [s, t] : {std::pair<int, const Terms*>{d, &td}, {r, &tr}})
          if (b.second < 0 || t->pipe > b.first || (t->pipe == b.first && s < b.second)) b = {t->pipe, s}, net = t->net;
        double sum = net + fill;
        sum += std::max({0.0, top[1].without(d, r).first, td.rs, tr.rs});
        sum += std::max({0.0, top[2].without(d, r).first, td.ag, tr.ag});
        sum += std::max({0.0, top[3].without(d, r).first, td.update, tr.update});
        return sum;
      };
      now = {overflow, step(0, at(0, n[0]), 1, at(1, n[1]))};
      if (moves == layers) break;
      Score best{overflow, now.second * (1 - 1e-12)};
      int from = -1, to = -1;
      auto consider = [&](int d) {
        for (int r = 0; r < p; ++r) {
          if (r == d) continue;
          const double moved = overflow - over(d, n[d]) - over(r, n[r]) + over(d, n[d] - 1) + over(r, n[r] + 1);
          if (overflow == 0 && moved > 0) continue;
          const Score x{moved, step(d, at(d, n[d] - 1), r, at(r, n[r] + 1))};
          if (x < best) best = x, from = d, to = r;
        }
      };
      if (overflow > 0) {
        for (int d = 0; d < p; ++d)
          if (n[d] > min_layers) consider(d);
      } else {
        for (const Top3& t : top) {
          const int d = t.v[0].second;
          if (d < 0 || t.v[0].first <= 0 || n[d] <= min_layers) continue;
          consider(d);
        }
      }
      if (from < 0) break;
      --n[from], ++n[to];
    }
    return std::pair{now, n};
  };
  // Single moves stop where two maxima must drop at once (ties): descend from other starts as
  // well, the pipelined parts alone balanced, the uniform split and the stages balanced by
  // their share of memory, and keep the best.
  auto best = descend(start);
  const std::vector<int> pipe_only =
      balanced_partition(layers, p, [&](int s, int n) { return at(s, n).pipe; }, min_layers);
  best = std::min(best, descend(pipe_only));
  const std::vector<int> even = uniform_partition(layers, p);
  if (*std::min_element(even.begin(), even.end()) >= min_layers) best = std::min(best, descend(even));
  if (best.first.first > 0) {
    const std::vector<int> by_memory =
        balanced_partition(layers, p, [&](int s, int n) { return share(s, n).first; }, min_layers);
    best = std::min(best, descend(by_memory));
  }
  return best.second;
}

StageCost::Bytes StageCost::bytes_per_step(const Workload& w, int layers) const {
  Bytes b;
  const int m = w.micro_batches;
  const double tokens = double(w.micro_batch) * w.seq_len;
  const double act = tokens * w.shape.hidden * w.boundary_bytes();
  if (tp > 1) b.tp = m * (double(model::block_counts(w.shape).tp_sums) * layers + first + last) * 2.0 * (tp - 1) / tp * tokens * w.shape.hidden * w.tp_wire_bytes();
  if (const auto [link, n] = hop_next(w.activation.chunks); link) b.next = n * m * act / tp, b.messages += 2.0 * n * m;
  if (const auto [link, n] = hop_prev(w.activation.chunks); link) b.prev = n * m * act / tp, b.messages += 2.0 * n * m;
  const double params = params_per_rank(w, layers);
  if (dp > 1) b.dp = (dp - 1.0) / dp * params * (w.grad_bytes() + w.gather_bytes());
  if (first != last && w.shape.tie_embeddings)
    b.emb = double(padded_vocab(w.shape.vocab, tp)) * w.shape.hidden / tp * w.grad_bytes();
  return b;
}

namespace {

// The step's job-wide sum (the gradient norm, the loss and the stop flags, a few doubles) after
// the reduce-scatter: a ring all-reduce over the data-, tensor- and pipeline-parallel groups
// in turn (parallel::ParallelGroups::sum_over_job), 2 (g - 1) hops each, every hop the
// slowest latency of the group's links or, under host emulation, the hop the steps measured
// when it is longer (job_sum_hop_s). Every rank waits for it before its update.
double job_sums_s(const std::vector<StageCost>& stages) {
  double dp = 0, tp = 0, pp = 0;
  for (const StageCost& s : stages) {
    dp = std::max(dp, s.dp_link.latency_s);
    tp = std::max(tp, s.tp_link.latency_s);
    if (!s.last) pp = std::max(pp, s.next_link.latency_s);
  }
  const double measured = job_sum_hop_s(stages);
  const StageCost& any = stages.front();
  const int p = static_cast<int>(stages.size());
  return 2.0 * (any.dp - 1) * std::max(dp, measured) + 2.0 * (any.tp - 1) * std::max(tp, measured) +
         2.0 * (p - 1) * std::max(pp, measured);
}

// The pipeline's loop: what each message's latency costs where neighbouring stages wait on each
// other every micro-batch. In 1F1B's steady state a stage's next forward needs its
// neighbour's backward and forward in between, so a message's latency lies on the loop of two
// adjacent stages, once per micro-batch, however idle the link (zb-h1's held-back W passes
// cover part of it). The schedule's tables time it (schedule::pipeline_makespan): the step's
// extra time with every message's latency over the same tables without. Only the latency: a
// message's bandwidth is priced as the link's bottleneck and the fill and drain (pp_exposed_s,
// pp_fill_s). Interleaved plans: 0 (not modelled).
//
// Host emulation adds each message's own delay beyond its link's alpha (message_delays: the
// step is the mean over steps whose messages draw exponential delays, a fixed-seed Monte
// Carlo) and runs the stages that wait for the bottleneck faster (run_waiting_stages).
double pipeline_loop_s(const Workload& w, const std::vector<StageCost>& stages, const std::vector<StageTime>& times,
                       int bottleneck) {
  const int p = static_cast<int>(times.size());
  const spec::Schedule kind = w.activation.schedule;
  if (p < 2 || kind == spec::Schedule::kInterleaved) return 0;
  std::vector<schedule::HopTimes> hops(p - 1);
  for (int s = 0; s + 1 < p; ++s) {
    const LinkCost* next = stages[s].hop_next(1).first;
    const LinkCost* prev = stages[s + 1].hop_prev(1).first;
    hops[s] = {next ? next->latency_s : 0.0, prev ? prev->latency_s : 0.0};
  }
  const std::vector<double> delays = message_delays(stages, hops);
  bool any = false;
  for (int s = 0; s + 1 < p; ++s) any = any || hops[s].activation_s > 0 || hops[s].gradient_s > 0 || delays[s] > 0;
  if (!any) return 0;
  // A micro-batch's passes as the stage runs them, its tensor-parallel sums spread over them.
  std::vector<schedule::PassTimes> passes(p);
  std::vector<double> per_micro(p);
  for (int s = 0; s < p; ++s) {
    const StageTime& t = times[s];
    const double scale = t.compute_s > 0 ? (t.compute_s + t.tp_s) / t.compute_s : 1.0;
    const double weights = t.weights_s, forward = std::min(t.forward_s, t.compute_s - weights);
    passes[s] = {forward * scale, (t.compute_s - forward - weights) * scale, weights * scale};
    per_micro[s] = t.compute_s * scale;
  }
  const schedule::PipeSchedule table =
      kind == spec::Schedule::kZbH1 ? schedule::PipeSchedule::kZbH1 : schedule::PipeSchedule::k1f1b;
  const std::vector<schedule::HopTimes> free(p - 1);
  const int m = w.micro_batches, cap = std::max(16, 4 * p);
  const int m_span = std::min(m, cap + 2 * p);
  run_waiting_stages(stages, times, bottleneck, m_span, per_micro, [&] {
    return schedule::expected_pipeline_makespan(table, p, m_span, 1, passes, hops, delays, kLoopSamples, kLoopSeed);
  }, passes);
  auto extra = [&](int m) {
    return schedule::expected_pipeline_makespan(table, p, m, 1, passes, hops, delays, kLoopSamples, kLoopSeed) -
           schedule::pipeline_makespan(table, p, m, 1, passes, free);
  };
  // Past the warm-up the extra time grows by the same amount every two micro-batches (the loop
  // spans two): long steps are timed at two shorter lengths and extended along that line.
  if (m <= cap + 2 * p) return extra(m);
  const double e1 = extra(cap), e2 = extra(cap + 2 * p);
  return e1 + (m - cap) * (e2 - e1) / (2 * p);
}

}  // namespace

namespace {

// Where a link's figures for `op` came from.
std::string link_source(const LinkCost& l, const char* op, int ranks) {
  if (l.curves.seconds(op, ranks, 1 << 20)) return "measured (calibrate curves)";
  return l.calibrated ? "measured in a job" : "declared";
}

std::vector<std::pair<std::string, std::string>> sources_of(const StageCost& b, const StageTime& t) {
  std::vector<std::pair<std::string, std::string>> out;
  out.emplace_back("compute", to_string(t.compute_source));
  if (b.tp > 1) out.emplace_back("tensor comm", link_source(b.tp_link, "all_reduce", b.tp));
  const LinkCost* hop = !b.last ? &b.next_link : !b.first ? &b.prev_link : nullptr;
  if (hop) out.emplace_back("pipeline comm", link_source(*hop, "send_recv", 2));
  if (b.dp > 1) out.emplace_back("data-parallel sync", link_source(b.dp_link, "reduce_scatter", b.dp));
  out.emplace_back("update", b.update_from_table        ? "measured (calibrate table)"
                             : b.update_s_per_param > 0 ? "measured in a job"
                                                        : "not priced (no calibration)");
  return out;
}

}  // namespace

Estimate estimate_step(const Workload& w, const std::vector<StageCost>& stages, const std::vector<int>& layers,
                       int world) {
  int p = static_cast<int>(stages.size());
  int m = w.micro_batches;
  Estimate e;
  std::vector<StageTime> times(p);
  for (int s = 0; s < p; ++s) times[s] = stages[s].time(w, layers[s]);
  const Coupled c = couple(p, m, [&](int s) -> const StageTime& { return times[s]; });
  e.bottleneck_stage = c.bottleneck;
  const StageCost& b = stages[e.bottleneck_stage];
  const StageTime& t = times[e.bottleneck_stage];
  e.compute_s = m * t.compute_s;
  e.recompute_s = m * t.recompute_s;
  e.tp_comm_s = m * t.tp_s;
  // Steady state: what the links add to each slot; fill and drain: every hop's transfer once
  // in each direction, on the critical path.
  e.pp_comm_s = m * t.pp_exposed_s() + c.fill;
  // The loop's latency beyond what the sends above already wait for (pipeline_loop_s).
  e.pp_loop_s = std::max(0.0, pipeline_loop_s(w, stages, times, e.bottleneck_stage) - e.pp_comm_s);
  e.pp_comm_s += e.pp_loop_s;
  e.bubble_s = t.bubble_s(p);
  e.dp_comm_s = c.sync_rs + c.sync_ag;
  e.update_s = c.update;
  e.log_s = w.log_s;
  e.sums_s = job_sums_s(stages);
  e.step_time_s = e.compute_s + e.tp_comm_s + e.pp_comm_s + e.bubble_s + e.dp_comm_s + e.update_s + e.log_s + e.sums_s;
  e.quota_s = quota_s(w, stages, layers, times, e);  // host emulation's CPU quota (0 without)
  e.step_time_s += e.quota_s;
  e.sources = sources_of(b, t);
  double tokens = double(w.global_batch) * w.seq_len;
  e.tokens_per_s = e.step_time_s > 0 ? tokens / e.step_time_s : 0;
  double flops = train_flops_per_token(w.shape, b.tp, w.seq_len) * tokens;
  e.tflops_per_device = e.step_time_s > 0 ? flops / e.step_time_s / world / 1e12 : 0;
  // Bytes sent per step, all ranks together, by the class of the link each send takes.
  for (int s = 0; s < p; ++s) {
    const StageCost& sc = stages[s];
    const double ranks = double(sc.tp) * sc.dp;
    const StageCost::Bytes sent = sc.bytes_per_step(w, layers[s]);
    e.host_bytes.push_back(StageCost::host_bytes(sent));
    e.host_messages.push_back(sent.messages);
    e.tp_bytes.push_back(sent.tp);
    // Each kind's bytes over the links its sends take (StageCost::SendKinds).
    auto add = [&](const LinkShares& kinds, double bytes) {
      for (int k = 0; k < kLinkKinds; ++k) e.bytes_per_step[k] += bytes * ranks * kinds[k];
    };
    add(sc.sends.tp, sent.tp);
    add(sc.hop_next_kinds(), sent.next);
    add(sc.hop_prev_kinds(), sent.prev);
    add(sc.sends.dp, sent.dp);
    add(sc.sends.emb, sent.emb);
  }
  return e;
}


}  // namespace holmes::plan
