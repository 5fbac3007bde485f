#include "engine/spec/schema.hpp"

#include <fmt/format.h>

#include <limits>
#include <set>
#include <type_traits>
#include <utility>

#include "engine/spec/data_sources.hpp"
#include "engine/spec/scalar.hpp"
#include "model/architecture.hpp"

namespace holmes::spec {
namespace {

// Each factory below binds a key to a member of JobSpec through an accessor lambda
// `[](JobSpec& s) -> T& { return s.section.member; }` and builds the apply/show pair.
#define HOLMES_REF(member) [](JobSpec& s) -> auto& { return s.member; }

template <class Ref>
Field integer(std::string path, Ref ref, std::string def, int64_t lo, int64_t hi, std::string doc) {
  // The member's own type bounds what is accepted (train.micro_batch is an int): a larger
  // value is out of range, never wrapped around.
  using Member = std::remove_reference_t<decltype(ref(std::declval<JobSpec&>()))>;
  if (static_cast<uint64_t>(hi) > static_cast<uint64_t>(std::numeric_limits<Member>::max()))
    hi = static_cast<int64_t>(std::numeric_limits<Member>::max());
  std::string type = hi == kNoMax ? fmt::format("integer >= {}", lo) : fmt::format("integer in [{}, {}]", lo, hi);
  Field f{std::move(path), type, std::move(def), false, std::move(doc), {}, {}};
  f.apply = [ref, lo, hi, type](JobSpec& s, const YAML::Node& v) -> std::string {
    int64_t x = 0;
    if (auto err = parse_int(v, &x); !err.empty()) return err + ", expected " + type;
    if (x < lo || x > hi) return fmt::format("value {} is out of range, expected {}", x, type);
    ref(s) = static_cast<std::remove_reference_t<decltype(ref(s))>>(x);
    return "";
  };
  f.show = [ref](const JobSpec& s) { return fmt::format("{}", ref(const_cast<JobSpec&>(s))); };
  return f;
}

template <class Ref>
Field real(std::string path, Ref ref, std::string def, double lo, double hi, bool lo_open, std::string doc) {
  std::string type = fmt::format("number {} {}{}", lo_open ? ">" : ">=", lo,
                                 hi < kRealMax ? fmt::format(" and <= {}", hi) : "");
  Field f{std::move(path), type, std::move(def), false, std::move(doc), {}, {}};
  f.apply = [ref, lo, hi, lo_open, type](JobSpec& s, const YAML::Node& v) -> std::string {
    double x = 0;
    if (auto err = parse_real(v, &x); !err.empty()) return err + ", expected " + type;
    if (x < lo || (lo_open && x == lo) || x > hi)
      return fmt::format("value {} is out of range, expected {}", x, type);
    ref(s) = x;
    return "";
  };
  f.show = [ref](const JobSpec& s) { return fmt::format("{}", ref(const_cast<JobSpec&>(s))); };
  return f;
}

template <class Ref>
Field text(std::string path, Ref ref, std::string def, std::string doc) {
  Field f{std::move(path), "string", std::move(def), false, std::move(doc), {}, {}};
  f.apply = [ref](JobSpec& s, const YAML::Node& v) -> std::string {
    std::string x;
    if (auto err = parse_string(v, &x); !err.empty()) return err + ", expected a string";
    ref(s) = x;
    return "";
  };
  f.show = [ref](const JobSpec& s) { return quote(ref(const_cast<JobSpec&>(s))); };
  return f;
}

// A closed choice: the member is an enum of choices.hpp; its name table gives the accepted
// values, in order, the first being the default.
template <class Ref>
Field choice(std::string path, Ref ref, std::string doc) {
  using E = std::remove_reference_t<decltype(ref(std::declval<JobSpec&>()))>;
  const std::vector<std::string> names = choice_names<E>();
  std::string type = "one of " + join(names, ", ");
  Field f{std::move(path), type, names.front(), false, std::move(doc), {}, {}};
  f.apply = [ref, type](JobSpec& s, const YAML::Node& v) -> std::string {
    std::string x;
    if (auto err = parse_string(v, &x); !err.empty()) return err + ", expected " + type;
    if (auto e = parse_choice<E>(x)) return ref(s) = *e, "";
    return fmt::format("value '{}' is not accepted, expected {}", x, type);
  };
  f.show = [ref](const JobSpec& s) { return to_string(ref(const_cast<JobSpec&>(s))); };
  return f;
}

// A string member that takes one of `choices` as it is (parallel.order, which the planner
// reads as a sequence of axes).
template <class Ref>
Field spelled(std::string path, Ref ref, std::vector<std::string> choices, std::string doc) {
  std::string type = "one of " + join(choices, ", ");
  Field f{std::move(path), type, choices.front(), false, std::move(doc), {}, {}};
  f.apply = [ref, choices, type](JobSpec& s, const YAML::Node& v) -> std::string {
    std::string x;
    if (auto err = parse_string(v, &x); !err.empty()) return err + ", expected " + type;
    for (const auto& c : choices)
      if (c == x) return ref(s) = x, "";
    return fmt::format("value '{}' is not accepted, expected {}", x, type);
  };
  f.show = [ref](const JobSpec& s) { return ref(const_cast<JobSpec&>(s)); };
  return f;
}

// model.arch: the name of a registered architecture (model/architecture.hpp), looked up when
// the value is read, so an architecture a program registers counts too.
template <class Ref>
Field architecture(std::string path, Ref ref, std::string doc) {
  const std::string type = "one of " + join(model::architecture_names(), ", ");
  Field f{std::move(path), type, model::kDefaultArch, false, std::move(doc), {}, {}};
  f.apply = [ref](JobSpec& s, const YAML::Node& v) -> std::string {
    const std::string accepted = "one of " + join(model::architecture_names(), ", ");
    std::string x;
    if (auto err = parse_string(v, &x); !err.empty()) return err + ", expected " + accepted;
    if (model::find_architecture(x) == nullptr) return fmt::format("value '{}' is not accepted, expected {}", x, accepted);
    ref(s) = x;
    return "";
  };
  f.show = [ref](const JobSpec& s) { return ref(const_cast<JobSpec&>(s)); };
  return f;
}

template <class Ref>
Field degree(std::string path, Ref ref, std::string doc, std::string def = "1", int64_t max = 1'000'000) {
  const std::string type = fmt::format("integer in [1, {}] or auto", max);
  Field f{std::move(path), type, std::move(def), false, std::move(doc), {}, {}};
  f.apply = [ref, type, kMaxDegree = max](JobSpec& s, const YAML::Node& v) -> std::string {
    if (v.IsScalar() && v.Scalar() == "auto") return ref(s) = kAuto, "";
    int64_t x = 0;
    if (auto err = parse_int(v, &x); !err.empty()) return err + ", expected " + type;
    if (x < 1 || x > kMaxDegree) return fmt::format("value {} is out of range, expected {}", x, type);
    ref(s) = static_cast<int>(x);
    return "";
  };
  f.show = [ref](const JobSpec& s) {
    int x = ref(const_cast<JobSpec&>(s));
    return x == kAuto ? std::string("auto") : std::to_string(x);
  };
  return f;
}

template <class Ref>
Field sources(std::string path, Ref ref, std::string doc) {
  Field f{std::move(path), "a path, a list of paths, or a mixture: a list of {path, weight, name}", "[]", false,
          std::move(doc), {}, {}};
  f.apply = [ref](JobSpec& s, const YAML::Node& v) -> std::string {
    std::vector<DataSourceSpec> out;
    if (auto err = parse_data_sources(v, &out); !err.empty())
      return err + "; expected a path, a list of paths, or a list of {path, weight, name} (docs/job-spec.md)";
    ref(s) = out;
    return "";
  };
  f.show = [ref](const JobSpec& s) { return show_data_sources(ref(const_cast<JobSpec&>(s))); };
  return f;
}

Field partition() {
  const std::string type = "auto, uniform, or a list of layers per stage such as [26, 22]";
  Field f{"parallel.partition", type, "auto", false,
          "Layers per pipeline stage: auto balances stages with the cost model (faster islands get more "
          "layers), uniform splits evenly, a list is taken as given and must sum to model.layers.",
          {}, {}};
  f.apply = [type](JobSpec& s, const YAML::Node& v) -> std::string {
    if (v.IsScalar()) {
      const auto kind = parse_choice<PartitionKind>(v.Scalar());
      if (kind && *kind != PartitionKind::kList) {
        s.parallel.partition = Partition{*kind, {}};
        return "";
      }
    }
    if (!v.IsSequence()) return fmt::format("{} is not accepted, expected {}", describe(v), type);
    Partition p{PartitionKind::kList, {}};
    for (std::size_t i = 0; i < v.size(); ++i) {
      int64_t x = 0;
      if (auto err = parse_int(v[i], &x); !err.empty() || x < 1)
        return fmt::format("element {} ({}) is not accepted, expected a layer count >= 1", i, describe(v[i]));
      p.layers.push_back(static_cast<int>(x));
    }
    if (p.layers.empty()) return "an empty list is not accepted, expected " + type;
    s.parallel.partition = p;
    return "";
  };
  f.show = [](const JobSpec& s) {
    const auto& p = s.parallel.partition;
    return p.kind == PartitionKind::kList ? fmt::format("[{}]", fmt::join(p.layers, ", ")) : to_string(p.kind);
  };
  return f;
}

template <class Ref>
Field boolean(std::string path, Ref ref, std::string def, std::string doc) {
  Field f{std::move(path), "true or false", std::move(def), false, std::move(doc), {}, {}};
  f.apply = [ref](JobSpec& s, const YAML::Node& v) -> std::string {
    std::string x;
    if (auto err = parse_string(v, &x); !err.empty()) return err + ", expected true or false";
    if (x == "true") return ref(s) = true, "";
    if (x == "false") return ref(s) = false, "";
    return fmt::format("value '{}' is not accepted, expected true or false", x);
  };
  f.show = [ref](const JobSpec& s) { return std::string(ref(const_cast<JobSpec&>(s)) ? "true" : "false"); };
  return f;
}

// checkpoint.resume: auto, none or a checkpoint folder (any non-empty path).
Field resume() {
  const std::string type = "auto, none or a checkpoint folder";
  Field f{"checkpoint.resume", type, "none", false,
          "Start from a checkpoint: auto = the newest complete one in the checkpoint folder (fresh start when "
          "there is none), none = fresh start, a path = that checkpoint folder (step-NNNNNNNN).",
          {}, {}};
  f.apply = [type](JobSpec& s, const YAML::Node& v) -> std::string {
    std::string x;
    if (auto err = parse_string(v, &x); !err.empty()) return err + ", expected " + type;
    if (x.empty()) return "an empty value is not accepted, expected " + type;
    const auto mode = parse_choice<ResumeMode>(x);
    s.checkpoint.resume = mode ? *mode : ResumeMode::kPath;
    s.checkpoint.resume_path = mode ? "" : x;
    return "";
  };
  f.show = [](const JobSpec& s) {
    const auto& c = s.checkpoint;
    return c.resume == ResumeMode::kPath ? quote(c.resume_path) : to_string(c.resume);
  };
  return f;
}

Field required(Field f) {
  f.required = true;
  return f;
}

std::vector<Field> make_schema() {
  constexpr int64_t M = kNoMax;
  std::vector<Field> f;
  // job
  f.push_back(text("job.name", HOLMES_REF(job.name), "holmes-job", "Name of the run, shown in logs."));
  f.push_back(integer("job.seed", HOLMES_REF(job.seed), "1234", 0, M, "Seed of weights, data order and sampling."));
  f.push_back(text("job.output_dir", HOLMES_REF(job.output_dir), "runs/holmes-job",
                   "Folder for metrics.jsonl, the final model and (by default) checkpoints."));
  f.push_back(boolean("job.overwrite", HOLMES_REF(job.overwrite), "false",
                      "Start fresh even when job.output_dir holds another run: its checkpoints, final weights "
                      "and metrics are deleted first (--overwrite)."));
  f.push_back(choice("job.device", HOLMES_REF(job.device),
                     "Compute backend: auto takes CUDA GPUs when present, else the CPU."));
  // model
  f.push_back(architecture("model.arch", HOLMES_REF(model.arch),
                           "Model family: gpt2 (learned positions, LayerNorm, GELU, biases, tied head) or llama "
                           "(rotary positions, RMSNorm, SwiGLU, grouped-query attention, no biases, untied head; "
                           "docs/model.md), or another registered architecture."));
  f.push_back(required(integer("model.layers", HOLMES_REF(model.layers), "", 1, 4096, "Transformer blocks (L).")));
  f.push_back(required(integer("model.hidden", HOLMES_REF(model.hidden), "", 1, 1 << 20, "Hidden size (C).")));
  f.push_back(required(integer("model.heads", HOLMES_REF(model.heads), "", 1, 4096, "Attention heads (NH).")));
  f.push_back(integer("model.vocab_size", HOLMES_REF(model.vocab_size), "257", 2, 1 << 24,
                      "Vocabulary (V); padded internally for fast GEMMs. 257 = bytes + end-of-text."));
  f.push_back(integer("model.max_seq_len", HOLMES_REF(model.max_seq_len), "1024", 1, 1 << 20,
                      "Context length: rows of gpt2's learned position embedding, of llama's rotary table."));
  f.push_back(integer("model.kv_heads", HOLMES_REF(model.kv_heads), "0", 0, 4096,
                      "llama: key/value heads (grouped-query attention; must divide model.heads); 0 = model.heads."));
  f.push_back(integer("model.ffn_hidden", HOLMES_REF(model.ffn_hidden), "0", 0, 1 << 22,
                      "llama: MLP width F (SwiGLU); 0 = 2/3 x 4 x model.hidden rounded up to model.ffn_multiple."));
  f.push_back(integer("model.ffn_multiple", HOLMES_REF(model.ffn_multiple), "256", 1, 1 << 16,
                      "llama: the derived model.ffn_hidden is rounded up to a multiple of this."));
  f.push_back(real("model.rope_theta", HOLMES_REF(model.rope_theta), "500000", 0, kRealMax, true,
                   "llama: rotary embedding base (Llama 2: 10000, Llama 3: 500000)."));
  f.push_back(real("model.norm_eps", HOLMES_REF(model.norm_eps), "1e-5", 0, 1, true, "llama: RMSNorm epsilon."));
  f.push_back(boolean("model.tie_embeddings", HOLMES_REF(model.tie_embeddings), "false",
                      "llama: the LM head is the token embedding (gpt2 always ties it)."));
  // data
  f.push_back(choice("data.source", HOLMES_REF(data.source),
                     "synthetic: the embedded generated corpus; files: data.train token files."));
  f.push_back(sources("data.train", HOLMES_REF(data.train),
                      "Training token files (prepare-data's, llm.c's 16 or 32 bit, raw uint16, Megatron datasets by "
                      "prefix): one source, or a mixture by token weight (Megatron's --data-path w1 p1 w2 p2)."));
  f.push_back(sources("data.valid", HOLMES_REF(data.valid),
                      "Validation token files, spelled as data.train (each source's loss is reported as "
                      "val_loss/NAME; weights weigh them in val_loss); empty = the held-out tail of each training "
                      "source."));
  f.push_back(choice("data.format", HOLMES_REF(data.format),
                     "Token file format; auto takes a path with PREFIX.bin beside PREFIX.idx for a Megatron "
                     "dataset, else reads the llm.c header when present."));
  f.push_back(boolean("data.document_mask", HOLMES_REF(data.document_mask), "false",
                      "Documents packed in a sequence do not see each other: attention is block-causal over them "
                      "and positions (learned or rotary) restart at each (Megatron's --reset-attention-mask and "
                      "--reset-position-ids). Documents start at a Megatron index's boundaries, else at each "
                      "data.document_token."));
  f.push_back(boolean("data.mask_document_start", HOLMES_REF(data.mask_document_start), "false",
                      "Leave out the loss of each token that starts a document (what the end of the previous "
                      "document would predict; Megatron's --eod-mask-loss). The loss is the mean over the targets "
                      "that count."));
  f.push_back(integer("data.document_token", HOLMES_REF(data.document_token), "-1", -1, M,
                      "The id that starts a document in llm.c and raw files, for data.document_mask and "
                      "data.mask_document_start; -1 = the document token of the files' tokenizer (prepare-data "
                      "saves it beside them; 256 for the synthetic data)."));
  f.push_back(integer("data.synthetic.tokens", HOLMES_REF(data.synthetic.tokens), "2000000", 1024, M,
                      "Length of the generated corpus."));
  f.push_back(integer("data.synthetic.seed", HOLMES_REF(data.synthetic.seed), "7", 0, M,
                      "Seed of the generated corpus."));
  // train
  f.push_back(required(integer("train.steps", HOLMES_REF(train.steps), "", 1, M, "Optimizer steps.")));
  f.push_back(integer("train.micro_batch", HOLMES_REF(train.micro_batch), "8", 1, M,
                      "Sequences per micro-batch on each data-parallel rank."));
  f.push_back(integer("train.global_batch", HOLMES_REF(train.global_batch), "8", 1, M,
                      "Sequences per optimizer step over the whole job (micro_batch x data x accumulation)."));
  f.push_back(integer("train.seq_len", HOLMES_REF(train.seq_len), "64", 1, M, "Tokens per sequence (T)."));
  f.push_back(real("train.lr", HOLMES_REF(train.lr), "3e-4", 0, 10, true, "Peak learning rate."));
  f.push_back(real("train.min_lr", HOLMES_REF(train.min_lr), "3e-5", 0, 10, false, "Learning rate at the end of decay."));
  f.push_back(integer("train.warmup_steps", HOLMES_REF(train.warmup_steps), "0", 0, M, "Linear warm-up steps."));
  f.push_back(integer("train.warmup_tokens", HOLMES_REF(train.warmup_tokens), "0", 0, M,
                      "The warm-up in tokens seen instead of steps (excludes train.warmup_steps); 0: warmup_steps."));
  f.push_back(integer("train.decay_tokens", HOLMES_REF(train.decay_tokens), "0", 0, M,
                      "Tokens seen when the decay reaches min_lr; 0: steps x global_batch x seq_len."));
  f.push_back(choice("train.lr_schedule", HOLMES_REF(train.lr_schedule),
                     "Decay after warm-up, from lr to min_lr at train.steps."));
  f.push_back(real("train.weight_decay", HOLMES_REF(train.weight_decay), "0.1", 0, 10, false,
                   "AdamW decoupled weight decay (not on biases and LayerNorm)."));
  f.push_back(real("train.beta1", HOLMES_REF(train.beta1), "0.9", 0, 0.999999, false, "AdamW beta1."));
  f.push_back(real("train.beta2", HOLMES_REF(train.beta2), "0.95", 0, 0.999999, false, "AdamW beta2."));
  f.push_back(real("train.eps", HOLMES_REF(train.eps), "1e-8", 0, 1, true, "AdamW epsilon."));
  f.push_back(real("train.grad_clip", HOLMES_REF(train.grad_clip), "1.0", 0, kRealMax, false,
                   "Clip the global gradient norm to this; 0 disables."));
  f.push_back(choice("train.precision", HOLMES_REF(train.precision),
                     "Weights copy and activations: bf16 (fp32 master weights, gradients, AdamW moments and "
                     "accumulation), fp32, or fp8: bf16 with the linear layers' GEMMs in FP8 (E4M3 weights and "
                     "activations, E5M2 gradients, per-tensor current scaling) on GPUs of compute capability 8.9 or "
                     "newer; auto is bf16 on GPUs, fp32 on CPUs."));
  f.push_back(boolean("train.fp8_lm_head", HOLMES_REF(train.fp8_lm_head), "false",
                      "With precision fp8: run the LM head's GEMMs in FP8 too (else bf16; the head's logits are the "
                      "most sensitive to rounding)."));
  f.push_back(choice("train.recompute", HOLMES_REF(train.recompute),
                     "What a transformer block keeps for its backward: none (every activation), selective (the "
                     "GEMM outputs and residual stream; norms, the MLP activation and an unfused attention's "
                     "softmax are recomputed), full (its input only; its forward is recomputed); auto: the "
                     "cheapest that fits in memory by the planner's estimate."));
  f.push_back(integer("train.eval_interval", HOLMES_REF(train.eval_interval), "0", 0, M,
                      "Steps between validation runs; 0 disables."));
  f.push_back(integer("train.eval_steps", HOLMES_REF(train.eval_steps), "10", 1, M, "Global batches per validation (as Megatron-LM's --eval-iters): the same sequences under every parallel plan."));
  // parallel
  f.push_back(degree("parallel.tensor", HOLMES_REF(parallel.tensor), "Tensor-parallel degree (inside a node)."));
  f.push_back(degree("parallel.pipeline", HOLMES_REF(parallel.pipeline), "Pipeline-parallel degree (stages)."));
  f.push_back(degree("parallel.data", HOLMES_REF(parallel.data), "Data-parallel degree."));
  f.push_back(choice("parallel.placement", HOLMES_REF(parallel.placement),
                     "holmes: NIC-aware (TP in a node, DP in an island, pipeline across islands); "
                     "naive: Megatron-LM rank order over nodes as given, uniform partition, best transport per group; "
                     "megatron: the same with every group over Ethernet (Megatron-LM on a mixed cluster)."));
  f.push_back(partition());
  f.push_back(spelled("parallel.order", HOLMES_REF(parallel.order),
                     {"tp-dp-pp", "tp-pp-dp", "dp-tp-pp", "dp-pp-tp", "pp-tp-dp", "pp-dp-tp"},
                     "Rank order of the naive placement, fastest-varying first (Megatron-LM)."));
  f.push_back(choice("parallel.schedule", HOLMES_REF(parallel.schedule),
                     "Pipeline schedule: 1f1b (one forward, one backward), zb-h1 (zero-bubble H1: backward split "
                     "into input and weight gradients, the weight passes fill the bubbles and the waits for "
                     "pipeline sends; every stage holds as many micro-batches as 1F1B's first); auto: the "
                     "fastest that fits in memory by the planner's estimate. Default 1f1b: in the CPU lab "
                     "zb-h1 measured slower than the estimate says (docs/training.md); interleaved (Megatron-LM's "
                     "interleaved 1F1B: each stage holds parallel.virtual_stages model chunks, the bubble shrinks "
                     "by that factor for as many more pipeline sends; needs parallel.pipeline >= 2 and micro-batches "
                     "a multiple of it)."));
  f.push_back(degree("parallel.virtual_stages", HOLMES_REF(parallel.virtual_stages),
                     "interleaved: model chunks per pipeline stage (V >= 2; virtual stage chunk x pipeline + stage "
                     "holds the next layers in order); auto = the planner picks. Other schedules: auto or 1.",
                     "auto", 64));
  f.push_back(choice("parallel.cross_island", HOLMES_REF(parallel.cross_island),
                     "Transport of a GPU job's groups over Ethernet (across islands, or between nodes without "
                     "RDMA): nccl-socket (NCCL's socket transport from device buffers), gloo (Gloo TCP from host "
                     "copies), auto (the faster for the pipeline's message in the cost model)."));
  f.push_back(choice("parallel.pipe_fp8", HOLMES_REF(parallel.pipe_fp8),
                     "The pipeline's activation and gradient sends in FP8 (E4M3 activations, E5M2 gradients, one "
                     "scale per tensor: a quarter of fp32's bytes, half of bf16's): off; on; auto (on where the "
                     "planner prices the step faster with it: slow links between stages). Off, the plan says "
                     "what it would save."));
  f.push_back(choice("parallel.nccl", HOLMES_REF(parallel.nccl),
                     "GPU jobs: put device buffers on NCCL groups (docs/comm.md). off: every group stages them "
                     "through pinned host memory into Gloo; auto: NCCL for each group whose members all have "
                     "libnccl and a GPU of their own, Gloo staging for the others; on: NCCL for every group "
                     "(a node without libnccl is an error; ranks that share a GPU get a NCCL_HOSTID each, "
                     "a test set-up). off until the NCCL rows of scripts/gpu_check.sh have passed on a GPU."));
  f.push_back(integer("parallel.replicas", HOLMES_REF(parallel.replicas), "1", 1, 4096,
                      "Copies of the tensor x pipeline x data plan the world is split into, each placed inside "
                      "one island (or island group); parallel.outer says how they stay in step (docs/diloco.md)."));
  f.push_back(choice("parallel.outer", HOLMES_REF(parallel.outer),
                     "How replicas stay in step: sync (one data-parallel all-reduce spans them every step, as "
                     "without replicas) or diloco (each trains alone for parallel.inner_steps steps, then an "
                     "outer Nesterov step on the averaged change of the weights; it changes the optimisation, so "
                     "the planner only proposes it)."));
  f.push_back(integer("parallel.inner_steps", HOLMES_REF(parallel.inner_steps), "20", 1, M,
                      "diloco: local steps between two outer syncs of a fragment (H)."));
  f.push_back(real("parallel.outer_lr", HOLMES_REF(parallel.outer_lr), "0.7", 0, 10, true,
                   "diloco: learning rate of the outer Nesterov SGD (DiLoCo: 0.7)."));
  f.push_back(real("parallel.outer_momentum", HOLMES_REF(parallel.outer_momentum), "0.9", 0, 0.999, false,
                   "diloco: momentum of the outer Nesterov SGD (DiLoCo: 0.9)."));
  f.push_back(integer("parallel.fragments", HOLMES_REF(parallel.fragments), "1", 1, 1024,
                      "diloco: parts of the weights synced at staggered steps (Streaming DiLoCo); 1 = all at once."));
  f.push_back(choice("parallel.outer_dtype", HOLMES_REF(parallel.outer_dtype),
                     "diloco: precision of the outer gradient on the wire: fp32, bf16 (round to nearest even) or "
                     "int8 (symmetric, one fp32 scale per 256 values)."));
  f.push_back(integer("parallel.outer_overlap", HOLMES_REF(parallel.outer_overlap), "0", 0, M,
                      "diloco: inner steps the outer exchange runs beside (Streaming DiLoCo's tau): 0 = the next "
                      "step waits for it; tau > 0 = it is applied tau steps later on the new anchor plus the "
                      "local progress made meanwhile. Below inner_steps / fragments."));
  f.push_back(boolean("parallel.elastic", HOLMES_REF(parallel.elastic), "false",
                      "replicas (sync or diloco) survive losing one (its ranks die, hang or are cut off): the "
                      "others agree through the rendezvous store on who is left, rebuild the groups across "
                      "replicas and go on (docs/elastic.md); sync replicas then keep the optimizer sharded inside "
                      "each replica (HSDP). Needs parallel.outer_overlap 0. With parallel.replicas 1: a job that "
                      "loses a node re-plans on the nodes that remain and trains on from its last checkpoint, "
                      "without a new launch (a job across 2 or more nodes)."));
  f.push_back(integer("parallel.min_replicas", HOLMES_REF(parallel.min_replicas), "1", 1, 4096,
                      "parallel.elastic: whole replicas that must remain for the job to go on after a loss."));
  // cluster
  f.push_back(text("cluster.topology", HOLMES_REF(cluster.topology), "",
                   "Topology file (docs/topology.md); empty = discover the nodes at run time."));
  f.push_back(text("cluster.calibration", HOLMES_REF(cluster.calibration), "",
                   "Calibration file (docs/cost-model.md) whose measured compute rate and link efficiencies the "
                   "cost model uses; empty = the topology's figures."));
  f.push_back(text("cluster.calibrate", HOLMES_REF(cluster.calibrate), "",
                   "Measure a calibration in this (multi-process) job: a link probe at start-up and the compute "
                   "time of the steps; written to this file at the end. Empty = off."));
  f.push_back(text("cluster.rendezvous", HOLMES_REF(cluster.rendezvous), "auto",
                   "auto (from Slurm / MASTER_ADDR), tcp://host:port, or file:///shared/path."));
  f.push_back(real("cluster.timeout_s", HOLMES_REF(cluster.timeout_s), "300", 0, 86400, true,
                   "Time-out of rendezvous and of every collective, in seconds."));
  f.push_back(text("cluster.sysfs_root", HOLMES_REF(cluster.sysfs_root), "/", "Root under which NICs are discovered."));
  f.push_back(real("cluster.device_tflops", HOLMES_REF(cluster.device_tflops), "0", 0, kRealMax, false,
                   "Sustained TFLOP/s per device for the cost model; 0 = from the topology."));
  f.push_back(real("cluster.compute_efficiency", HOLMES_REF(cluster.compute_efficiency), "0", 0, 1, false,
                   "Fraction of peak the GEMMs reach; 0 = built-in default."));
  for (auto [name, pick] : {std::pair{"ib", &ClusterSection::ib}, {"roce", &ClusterSection::roce},
                            {"ethernet", &ClusterSection::ethernet}, {"intra_node", &ClusterSection::intra_node}}) {
    auto bw = [pick](JobSpec& s) -> double& { return (s.cluster.*pick).bandwidth_gbps; };
    auto lat = [pick](JobSpec& s) -> double& { return (s.cluster.*pick).latency_us; };
    f.push_back(real(fmt::format("cluster.{}.bandwidth_gbps", name), bw, "0", 0, kRealMax, false,
                     fmt::format("Override the {} link bandwidth (Gb/s) of the cost model; 0 = from topology.", name)));
    f.push_back(real(fmt::format("cluster.{}.latency_us", name), lat, "0", 0, kRealMax, false,
                     fmt::format("Override the {} link latency (us) of the cost model; 0 = default.", name)));
  }
  // checkpoint
  f.push_back(text("checkpoint.dir", HOLMES_REF(checkpoint.dir), "", "Checkpoint folder; empty = <job.output_dir>/checkpoints."));
  f.push_back(integer("checkpoint.interval", HOLMES_REF(checkpoint.interval), "0", 0, M,
                      "Steps between checkpoints; 0 = only at the end and on preemption."));
  f.push_back(integer("checkpoint.keep", HOLMES_REF(checkpoint.keep), "3", 1, 1000000, "Newest complete checkpoints kept."));
  f.push_back(resume());
  f.push_back(boolean("checkpoint.weights_only", HOLMES_REF(checkpoint.weights_only), "false",
                      "With checkpoint.resume: load the weights only (fresh optimizer, step 0), for fine-tuning."));
  f.push_back(text("checkpoint.init_from", HOLMES_REF(checkpoint.init_from), "",
                   "A Hugging Face checkpoint folder (config.json + model.safetensors, or sharded with "
                   "model.safetensors.index.json; GPT2LMHeadModel or LlamaForCausalLM) whose weights a fresh run starts "
                   "from (--init-from): continued pretraining of a published model. Its config must be the job's "
                   "model.*; a run that resumes a checkpoint ignores it. Empty = random init."));
  f.push_back(boolean("checkpoint.background_write", HOLMES_REF(checkpoint.background_write), "true",
                      "Write interval checkpoints from a copy of the shard while the next step trains (shorter pause, "
                      "one more shard of host memory); false = write before the next step."));
  // log
  f.push_back(integer("log.interval", HOLMES_REF(log.interval), "1", 1, M, "Steps between log lines."));
  f.push_back(choice("log.level", HOLMES_REF(log.level), "Log verbosity."));
  f.push_back(text("log.metrics", HOLMES_REF(log.metrics), "metrics.jsonl",
                   "JSON-lines metrics file under job.output_dir; empty disables."));
  f.push_back(real("log.straggler_threshold", HOLMES_REF(log.straggler_threshold), "0.2", 0, 100, true,
                   "A rank whose compute per step exceeds the median of its peers' (the ranks of the same stage and "
                   "tensor slice) by more than this share, or a replica whose mean exceeds the other replicas', is "
                   "named a straggler in the log and the metrics (docs/training.md, \"Stragglers\")."));
  f.push_back(integer("log.straggler_lines", HOLMES_REF(log.straggler_lines), "3", 1, 1000000,
                      "Consecutive log lines with the job's figures a rank or replica must be over "
                      "log.straggler_threshold to be named a straggler, and back under to stop being one."));
  return f;
}

}  // namespace

const std::vector<Field>& schema() {
  static const std::vector<Field> fields = make_schema();
  return fields;
}

const Field* find_field(const std::string& path) {
  for (const auto& f : schema())
    if (f.path == path) return &f;
  return nullptr;
}

const Field* find_field_by_leaf(const std::string& leaf) {
  for (const auto& f : schema())
    if (f.path.size() > leaf.size() && f.path.compare(f.path.size() - leaf.size() - 1, std::string::npos, "." + leaf) == 0)
      return &f;
  return nullptr;
}

bool is_group(const std::string& path) {
  for (const auto& f : schema())
    if (f.path.size() > path.size() && f.path.compare(0, path.size(), path) == 0 && f.path[path.size()] == '.')
      return true;
  return false;
}

std::vector<std::string> children_of(const std::string& group) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  std::string prefix = group.empty() ? "" : group + ".";
  for (const auto& f : schema()) {
    if (f.path.compare(0, prefix.size(), prefix) != 0) continue;
    std::string rest = f.path.substr(prefix.size());
    std::string child = rest.substr(0, rest.find('.'));
    if (seen.insert(child).second) out.push_back(child);
  }
  return out;
}

std::string schema_markdown() {
  std::string out = "| key | type | default | meaning |\n| --- | --- | --- | --- |\n";
  for (const auto& f : schema())
    out += fmt::format("| `{}` | {} | {} | {} |\n", f.path, f.type,
                       f.required ? "**required**" : (f.default_yaml.empty() ? "\"\"" : "`" + f.default_yaml + "`"), f.doc);
  return out;
}

}  // namespace holmes::spec
