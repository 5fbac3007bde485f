// The typed job spec: what a YAML job file (plus --set overrides) says, after validation.
// Every key, its type, default and meaning is listed once, in schema.cpp; docs/job-spec.md
// is the user-facing copy of that table.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/dtype.hpp"
#include "engine/spec/choices.hpp"
#include "model/gpt_config.hpp"

namespace holmes::spec {

// A parallel degree of 0 means "auto": the planner searches it.
inline constexpr int kAuto = 0;

struct JobSection {
  std::string name = "holmes-job";
  uint64_t seed = 1234;
  std::string output_dir = "runs/holmes-job";  // metrics.jsonl, logs; checkpoints by default
  Device device = Device::kAuto;
  bool overwrite = false;  // a fresh start may replace another run's checkpoints, final weights, metrics
};

// Model architecture (dimension legend in model/gpt_config.hpp).
struct ModelSection {
  std::string arch = model::kDefaultArch;  // a registered architecture (model/architecture.hpp)
  int layers = 0;        // L
  int hidden = 0;        // C
  int heads = 0;         // NH
  int vocab_size = 257;  // V before padding (257 = bytes + end-of-text)
  int max_seq_len = 1024;  // gpt2: learned position embeddings (n_positions); llama: rotary table
  // Options an architecture may read (model::ConfigOption; validation refuses them, set, on
  // an architecture that does not):
  int kv_heads = 0;             // KVH, grouped-query attention; 0 = heads
  int ffn_hidden = 0;           // F; 0 = 2/3 * 4C rounded up to ffn_multiple
  int ffn_multiple = 256;
  double rope_theta = 500000;   // rotary base
  double norm_eps = 1e-5;       // RMSNorm epsilon
  bool tie_embeddings = false;  // LM head = token embedding

  int resolved_kv_heads() const { return kv_heads == 0 ? heads : kv_heads; }
};

struct SyntheticData {
  int64_t tokens = 2'000'000;  // length of the generated training stream
  uint64_t seed = 7;
};

// One source of data.train or data.valid: token files read as one stream, with its share of
// a mixture's training tokens.
struct DataSourceSpec {
  std::string name;                // metric key (val_loss/<name>); "" = from the first file's name
  std::vector<std::string> paths;  // token files (llm.c, raw uint16, Megatron prefixes), in order
  double weight = 1;               // > 0; a mixture's weights are normalised to sum to 1
  bool weighted = false;           // the spec gave a weight (a mixture spelling)
};

struct DataSection {
  DataSource source = DataSource::kSynthetic;
  // One source (the single-path and path-list spellings) or a weighted mixture of sources.
  std::vector<DataSourceSpec> train;
  std::vector<DataSourceSpec> valid;  // empty = the held-out tail of each training source
  DataFormat format = DataFormat::kAuto;
  // Document masking (docs/training.md): attention block-causal over the documents packed in
  // a sequence, positions restarting at each (Megatron's --reset-attention-mask and
  // --reset-position-ids); mask_document_start leaves out the loss of the token that starts a
  // document (what the previous document's end would predict; Megatron's --eod-mask-loss).
  bool document_mask = false;
  bool mask_document_start = false;
  int64_t document_token = -1;  // the id that starts a document in llm.c/raw files; -1 = the tokenizer's
  SyntheticData synthetic;
  bool mixture() const { return train.size() > 1; }
};

struct TrainSection {
  int64_t steps = 0;
  int micro_batch = 8;    // sequences per micro-batch per data-parallel rank
  int global_batch = 8;   // sequences per optimizer step over the whole job
  int seq_len = 64;       // T
  double lr = 3e-4;
  double min_lr = 3e-5;
  int64_t warmup_steps = 0;
  int64_t warmup_tokens = 0;  // the warm-up in tokens seen instead of steps (0: warmup_steps)
  int64_t decay_tokens = 0;   // tokens seen at the end of decay (0: steps x global_batch x seq_len)
  LrSchedule lr_schedule = LrSchedule::kCosine;
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double grad_clip = 1.0;  // global grad-norm clip; 0 disables
  Precision precision = Precision::kAuto;  // auto: bf16 on GPUs, fp32 on CPUs (resolved by the plan)
  bool fp8_lm_head = false;  // precision fp8: the LM head's GEMMs in FP8 too
  Recompute recompute = Recompute::kAuto;  // auto: the planner's cheapest that fits (plan.recompute)
  int64_t eval_interval = 0;  // steps; 0 disables validation
  int eval_steps = 10;        // micro-batches per validation
};

struct Partition {
  PartitionKind kind = PartitionKind::kAuto;
  std::vector<int> layers;    // kind == list: layers per pipeline stage
};

struct ParallelSection {
  int tensor = 1;    // kAuto = search
  int pipeline = 1;  // kAuto = search
  int data = 1;      // kAuto = search
  Placement placement = Placement::kHolmes;
  Partition partition;
  std::string order = "tp-dp-pp";  // rank order, first is fastest varying
  // 1f1b by default: zb-h1 measured slower than 1f1b in the CPU lab (docs/training.md); auto:
  // the planner's fastest that fits (plan.activation.schedule).
  Schedule schedule = Schedule::k1f1b;
  // interleaved: model chunks per pipeline stage (V >= 2; virtual stage v = chunk x pipeline +
  // stage); kAuto = the planner picks. Other schedules: kAuto or 1.
  int virtual_stages = kAuto;
  CrossIsland cross_island = CrossIsland::kAuto;  // CUDA groups over Ethernet
  PipeFp8 pipe_fp8 = PipeFp8::kOff;  // pipeline sends in FP8 (on; auto: where the planner finds it pays)
  NcclMode nccl = NcclMode::kAuto;  // device buffers on NCCL groups (docs/comm.md)
  // Replicas (docs/diloco.md): the world split into `replicas` copies of one tensor x pipeline
  // x data plan. outer sync: one data-parallel all-reduce spans them (data degree x replicas);
  // diloco: each trains alone for inner_steps steps, then the replicas average the change of
  // their weights (the outer gradient) and take one Nesterov step (outer_lr, outer_momentum);
  // `fragments` parts of the weights are synced at staggered steps (Streaming DiLoCo), each
  // sent as outer_dtype.
  int replicas = 1;
  OuterMode outer = OuterMode::kSync;
  int inner_steps = 20;
  double outer_lr = 0.7;
  double outer_momentum = 0.9;
  int fragments = 1;
  OuterDtype outer_dtype = OuterDtype::kFp32;
  // diloco: inner steps the outer exchange of a fragment runs beside (Streaming DiLoCo's tau):
  // 0 = the next step waits for it; tau > 0 = it is applied after step done + tau, merged
  // with the local progress made meanwhile (docs/diloco.md). Below inner_steps / fragments.
  int outer_overlap = 0;
  // Replicas (sync or diloco) survive losing one (docs/elastic.md): the others go on while at
  // least min_replicas whole replicas remain, replica 0 among them. Sync replicas then shard
  // their optimizer inside each replica and all-reduce the owned gradients across (HSDP).
  bool elastic = false;
  int min_replicas = 1;
  bool diloco() const { return outer == OuterMode::kDiloco && replicas > 1; }
  // The data-parallel degree of the whole job as the batch sees it: data x replicas.
  int data_total() const { return data == kAuto ? kAuto : data * replicas; }
};

struct LinkOverride {
  double bandwidth_gbps = 0;  // 0 = take it from the topology
  double latency_us = 0;      // 0 = built-in default for the link class
};

struct ClusterSection {
  std::string topology;                // topology file; "" = discover at run time
  std::string calibration;             // calibration file the cost model reads; "" = none
  std::string calibrate;               // write a calibration measured in this job here; "" = off
  std::string rendezvous = "auto";     // auto | tcp://host:port | file:///path
  bool rendezvous_is_auto() const { return rendezvous == "auto"; }
  double timeout_s = 300;              // rendezvous and collective time-out
  std::string sysfs_root = "/";        // where NIC discovery reads sysfs
  double device_tflops = 0;            // sustained TFLOP/s per device; 0 = from topology
  double compute_efficiency = 0;       // fraction of peak reached by GEMMs; 0 = default
  LinkOverride ib, roce, ethernet, intra_node;
};

struct CheckpointSection {
  std::string dir;       // "" = <job.output_dir>/checkpoints
  int64_t interval = 0;  // steps; 0 = only at the end and on preemption
  int keep = 3;          // newest complete checkpoints kept
  ResumeMode resume = ResumeMode::kNone;
  std::string resume_path;      // resume == kPath: the step folder
  bool weights_only = false;    // load params only: fresh optimizer, step 0
  std::string init_from;        // a Hugging Face folder whose weights a fresh run starts from; "" = none
  bool background_write = true;  // write interval saves from a copy while the next step trains
};

struct LogSection {
  int interval = 1;            // steps between log lines
  LogLevel level = LogLevel::kInfo;
  std::string metrics = "metrics.jsonl";  // under job.output_dir; "" disables
  // A rank or replica is a straggler when its compute exceeds its peers' median by more than
  // this share for straggler_lines log lines with the job's figures in a row (and stops being
  // one after as many lines back under): engine/train/stragglers.hpp.
  double straggler_threshold = 0.2;
  int straggler_lines = 3;
};

// The micro-batch rule, written once: a step of `global_batch` sequences over `data_ranks`
// data-parallel ranks (every replica's) in micro-batches of `micro_batch` sequences runs
// global_batch / (micro_batch x data_ranks) micro-batches on each rank; 0 when that does not
// divide evenly or a size is not positive. The planner, the spec's checks and the rank plan
// the executor runs all count with it.
inline int micro_batches(int global_batch, int micro_batch, int data_ranks) {
  const long long rows = static_cast<long long>(micro_batch) * data_ranks;
  return rows > 0 && global_batch > 0 && global_batch % rows == 0 ? static_cast<int>(global_batch / rows) : 0;
}

// train.precision `precision` on devices with (gpu) or without bf16 kernels: bf16 when asked
// for (fp8 trains in bf16 around its FP8 GEMMs), or auto on a GPU; else fp32.
inline bool trains_bf16(Precision precision, bool gpu) {
  return precision == Precision::kBf16 || precision == Precision::kFp8 || (precision == Precision::kAuto && gpu);
}

struct JobSpec {
  JobSection job;
  ModelSection model;
  DataSection data;
  TrainSection train;
  ParallelSection parallel;
  ClusterSection cluster;
  CheckpointSection checkpoint;
  LogSection log;

  // Derived, filled by validation.
  std::string source_file;  // the config file this came from ("" = embedded default)
  int micro_batches_per_step(int data_degree) const {
    return micro_batches(train.global_batch, train.micro_batch, data_degree);
  }
  bool global_batch_ok(int data_degree) const { return micro_batches_per_step(data_degree) > 0; }
  // train.precision on devices with (gpu) or without bf16 kernels: bf16 when asked for, or auto
  // on a GPU; else fp32. The one rule: the planner prices what it gives, the trainer trains it
  // (and refuses bf16 on a backend without bf16 kernels). fp8 is bf16 mixed precision whose
  // linear layers' GEMMs run in FP8 (model/fp8_recipe.hpp): its activations are bf16 too.
  bool trains_bf16(bool gpu) const { return spec::trains_bf16(train.precision, gpu); }
  bool trains_fp8() const { return train.precision == Precision::kFp8; }
  // The activations' element type that rule gives (common/dtype.hpp).
  DType activation_dtype(bool gpu) const { return trains_bf16(gpu) ? DType::kBf16 : DType::kF32; }
};

}  // namespace holmes::spec
