#include "engine/spec/validate.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <numeric>
#include <tuple>

#include "engine/spec/model_config.hpp"
#include "model/architecture.hpp"

namespace holmes::spec {

namespace {

// The architecture's model rules: an option it does not read (model::ConfigOption) is refused
// at any but its default (--print-config writes every key; another value would be silently
// ignored); then its own checks (Architecture::spec_problems: llama's grouped-query heads, its
// rotary head size and what the tensor-parallel degree must divide).
template <class Fail>
void model_arch_problems(const JobSpec& s, Fail& fail) {
  const auto& m = s.model;
  const model::Architecture* arch = model::find_architecture(m.arch);
  if (arch == nullptr) return;  // reported with model.arch
  const ModelSection d;
  const std::tuple<const char*, model::ConfigOption, bool> options[] = {
      {"model.kv_heads", model::kKvHeads, m.kv_heads != d.kv_heads},
      {"model.ffn_hidden", model::kFfnHidden, m.ffn_hidden != d.ffn_hidden},
      {"model.ffn_multiple", model::kFfnHidden, m.ffn_multiple != d.ffn_multiple},
      {"model.rope_theta", model::kRopeTheta, m.rope_theta != d.rope_theta},
      {"model.norm_eps", model::kNormEps, m.norm_eps != d.norm_eps},
      {"model.tie_embeddings", model::kTieEmbeddings, m.tie_embeddings != d.tie_embeddings}};
  bool refused = false;
  for (const auto& [key, option, differs] : options) {
    if (!differs || (arch->options() & option) != 0) continue;
    std::vector<std::string> readers;
    for (const model::Architecture* a : model::architectures())
      if ((a->options() & option) != 0) readers.emplace_back(a->name());
    const std::string who = fmt::format("{}", fmt::join(readers, " or "));
    fail(key, fmt::format("{} applies to model.arch {} only, but model.arch = {} ({} has {}); set model.arch: {}, or "
                          "remove the key", key, who, m.arch, m.arch, arch->fixed_choices(), who));
    refused = true;
  }
  if (refused) return;
  for (const model::SpecProblem& p : arch->spec_problems(raw_model_config(m), s.parallel.tensor))
    fail(p.key, p.message);
}

}  // namespace

namespace {

// parallel.replicas and the diloco keys.
template <class Fail>
void replica_problems(const JobSpec& s, Fail&& fail) {
  const auto& p = s.parallel;
  if (p.outer == OuterMode::kDiloco && p.replicas < 2)
    fail("parallel.outer", fmt::format("parallel.outer = diloco needs parallel.replicas >= 2 (it syncs replicas), "
                                       "got parallel.replicas = {}; accepted: sync, or diloco with replicas >= 2",
                                       p.replicas));
  if (p.outer == OuterMode::kDiloco && p.fragments > p.inner_steps)
    fail("parallel.fragments", fmt::format("parallel.fragments = {} exceeds parallel.inner_steps = {}: each fragment "
                                           "syncs at its own step of the {} (accepted: 1 .. {})", p.fragments,
                                           p.inner_steps, p.inner_steps, p.inner_steps));
  if (p.outer_overlap > 0 && p.outer != OuterMode::kDiloco)
    fail("parallel.outer_overlap", fmt::format("parallel.outer_overlap = {} overlaps the outer exchange of diloco, but "
                                               "parallel.outer = {}; accepted: 0, or parallel.outer = diloco",
                                               p.outer_overlap, to_string(p.outer)));
  const int gap = p.inner_steps / std::max(1, p.fragments);  // steps between two fragments' syncs
  if (p.outer == OuterMode::kDiloco && p.fragments <= p.inner_steps && p.outer_overlap >= gap)
    fail("parallel.outer_overlap", fmt::format("parallel.outer_overlap = {}: an exchange must land before the next "
                                               "one starts, every inner_steps / fragments = {} / {} = {} steps "
                                               "(accepted: 0 .. {})", p.outer_overlap, p.inner_steps, p.fragments,
                                               gap, gap - 1));
  if (p.elastic && p.outer_overlap > 0)
    fail("parallel.elastic", fmt::format("parallel.elastic = true with parallel.outer_overlap = {}: an exchange in "
                                         "flight beside the steps cannot be redone over the survivors yet; "
                                         "accepted: parallel.outer_overlap = 0 with elastic, or elastic false",
                                         p.outer_overlap));
  if (p.elastic && p.min_replicas > p.replicas)
    fail("parallel.min_replicas", fmt::format("parallel.min_replicas = {} exceeds parallel.replicas = {} (accepted: "
                                              "1 .. {})", p.min_replicas, p.replicas, p.replicas));
  if (p.replicas > 1 && p.placement != Placement::kHolmes)
    fail("parallel.replicas", fmt::format("parallel.replicas = {} places each replica inside an island with the "
                                          "holmes placement, but parallel.placement = {}; accepted: holmes, or "
                                          "parallel.replicas = 1", p.replicas, to_string(p.placement)));
}

// parallel.schedule: interleaved and parallel.virtual_stages.
template <class Fail>
void interleaved_problems(const JobSpec& s, Fail&& fail) {
  const auto& p = s.parallel;
  const auto& t = s.train;
  const int v = p.virtual_stages;
  if (p.schedule != Schedule::kInterleaved && p.schedule != Schedule::kAuto && v != kAuto && v != 1)
    fail("parallel.virtual_stages",
         fmt::format("parallel.virtual_stages = {} splits a stage into model chunks for the interleaved schedule, "
                     "but parallel.schedule = {}; accepted: auto or 1, or parallel.schedule = interleaved",
                     v, to_string(p.schedule)));
  if (p.schedule != Schedule::kInterleaved) return;
  if (p.outer == OuterMode::kDiloco)
    fail("parallel.outer", "parallel.outer = diloco with parallel.schedule = interleaved: the outer sync keeps one "
                           "weight buffer per rank and interleaved gives a rank several model chunks; accepted: "
                           "parallel.outer = sync, or parallel.schedule 1f1b, zb-h1 or auto");
  if (p.elastic && p.replicas > 1)
    fail("parallel.elastic", "parallel.elastic = true with parallel.schedule = interleaved: a replica that rejoins "
                             "takes one weight buffer and its moments from a peer, and interleaved gives a rank "
                             "several model chunks; accepted: parallel.elastic false, or parallel.schedule 1f1b, "
                             "zb-h1 or auto");
  if (v == 1)
    fail("parallel.virtual_stages", "parallel.virtual_stages = 1 with parallel.schedule = interleaved: interleaving "
                                    "needs at least 2 model chunks per stage; accepted: 2 .. 64 or auto (or "
                                    "parallel.schedule = 1f1b for one chunk)");
  if (p.pipeline != kAuto && p.pipeline < 2)
    fail("parallel.schedule", fmt::format("parallel.schedule = interleaved needs parallel.pipeline >= 2 (it "
                                          "interleaves model chunks across pipeline stages), got parallel.pipeline "
                                          "= {}; accepted: parallel.pipeline >= 2 or auto, or parallel.schedule = "
                                          "1f1b", p.pipeline));
  const int m = micro_batches(t.global_batch, t.micro_batch, std::max(1, p.data) * std::max(1, p.replicas));
  if (p.pipeline != kAuto && p.pipeline >= 2 && p.data != kAuto && m > 0 && m % p.pipeline != 0)
    fail("parallel.schedule",
         fmt::format("parallel.schedule = interleaved runs micro-batches in groups of parallel.pipeline = {}, but "
                     "train.global_batch / (train.micro_batch x parallel.data x parallel.replicas) = {} / ({} x {} "
                     "x {}) = {} micro-batches is not a multiple of {}; accepted: a train.global_batch giving a "
                     "multiple of {} micro-batches, or parallel.schedule = 1f1b",
                     p.pipeline, t.global_batch, t.micro_batch, p.data, p.replicas, m,
                     p.pipeline, p.pipeline));
  if (p.pipeline != kAuto && p.pipeline >= 2 && s.model.layers < p.pipeline * std::max(2, v))
    fail("model.layers",
         fmt::format("model.layers = {} is fewer than parallel.pipeline x parallel.virtual_stages = {} x {} = {}: "
                     "every virtual stage of the interleaved schedule needs at least one layer; accepted: "
                     "model.layers >= {}, fewer stages or chunks, or parallel.schedule = 1f1b",
                     s.model.layers, p.pipeline, v == kAuto ? std::string("2 (auto's least)") : std::to_string(v),
                     p.pipeline * std::max(2, v), p.pipeline * std::max(2, v)));
  if (p.partition.kind == PartitionKind::kList)
    fail("parallel.partition", "parallel.partition lists the layers of whole stages, but parallel.schedule = "
                               "interleaved cuts parallel.pipeline x parallel.virtual_stages virtual stages; "
                               "accepted: uniform or auto with interleaved, or parallel.schedule = 1f1b");
}

}  // namespace

std::vector<Problem> cross_field_problems(const JobSpec& s) {
  std::vector<Problem> out;
  auto fail = [&](std::string key, std::string message) { out.push_back({std::move(key), std::move(message)}); };
  const auto& m = s.model;
  const auto& t = s.train;
  const auto& p = s.parallel;
  if (m.heads > 0 && m.hidden % m.heads != 0)
    fail("model.hidden", fmt::format("model.hidden = {} must be divisible by model.heads = {} (head size C/NH); "
                                     "{} % {} = {}", m.hidden, m.heads, m.hidden, m.heads, m.hidden % m.heads));
  if (p.tensor != kAuto && p.tensor > 0 && m.heads % p.tensor != 0)
    fail("parallel.tensor", fmt::format("model.heads = {} must be divisible by parallel.tensor = {} "
                                        "(each tensor-parallel rank holds whole heads)", m.heads, p.tensor));
  model_arch_problems(s, fail);
  if (p.pipeline != kAuto && p.pipeline > m.layers)
    fail("parallel.pipeline", fmt::format("parallel.pipeline = {} exceeds model.layers = {}: every stage needs "
                                          "at least one layer", p.pipeline, m.layers));
  if (p.partition.kind == PartitionKind::kList) {
    const auto& l = p.partition.layers;
    const int sum = std::accumulate(l.begin(), l.end(), 0);
    if (p.pipeline != kAuto && static_cast<int>(l.size()) != p.pipeline)
      fail("parallel.partition", fmt::format("parallel.partition lists {} stages but parallel.pipeline = {}",
                                             l.size(), p.pipeline));
    if (sum != m.layers)
      fail("parallel.partition", fmt::format("parallel.partition [{}] sums to {} but model.layers = {}",
                                             fmt::join(l, ", "), sum, m.layers));
    if (std::any_of(l.begin(), l.end(), [](int n) { return n < 1; }))
      fail("parallel.partition", fmt::format("parallel.partition [{}]: every stage needs at least one layer",
                                             fmt::join(l, ", ")));
  }
  if (t.micro_batch > 0 && p.data != kAuto && p.data > 0 && p.replicas > 1) {
    if (micro_batches(t.global_batch, t.micro_batch, p.data * p.replicas) == 0)
      fail("train.global_batch",
           fmt::format("train.global_batch = {} must be divisible by train.micro_batch x parallel.data x "
                       "parallel.replicas = {} x {} x {} = {} (every replica takes an equal share of each step)",
                       t.global_batch, t.micro_batch, p.data, p.replicas, t.micro_batch * p.data * p.replicas));
  } else if (t.micro_batch > 0 && p.data != kAuto && p.data > 0) {
    if (micro_batches(t.global_batch, t.micro_batch, p.data) == 0)
      fail("train.global_batch",
           fmt::format("train.global_batch = {} must be divisible by train.micro_batch x parallel.data = {} x {} = {}",
                       t.global_batch, t.micro_batch, p.data, t.micro_batch * p.data));
  } else if (t.micro_batch > 0 && micro_batches(t.global_batch, t.micro_batch, 1) == 0) {
    fail("train.global_batch", fmt::format("train.global_batch = {} must be divisible by train.micro_batch = {}",
                                           t.global_batch, t.micro_batch));
  }
  replica_problems(s, fail);
  interleaved_problems(s, fail);
  if (t.seq_len > m.max_seq_len)
    fail("train.seq_len", fmt::format("train.seq_len = {} exceeds the model's context model.max_seq_len = {}",
                                      t.seq_len, m.max_seq_len));
  if (t.warmup_tokens > 0 && t.warmup_steps > 0)
    fail("train.warmup_tokens", fmt::format("train.warmup_tokens = {} and train.warmup_steps = {} both set the "
                                            "warm-up: give one of them (the other 0)",
                                            t.warmup_tokens, t.warmup_steps));
  if (t.min_lr > t.lr)
    fail("train.min_lr", fmt::format("train.min_lr = {} is larger than train.lr = {}", t.min_lr, t.lr));
  return out;
}

void validate(LoadedSpec& loaded, const std::string& source, std::vector<ConfigIssue>& issues) {
  JobSpec& s = loaded.spec;
  // An issue about `path`, located where that key's value came from.
  auto fail = [&](const std::string& path, std::string msg) {
    auto it = loaded.origin.find(path);
    Origin o = it != loaded.origin.end() ? it->second : Origin{source};
    issues.push_back({o.source == "default" ? source : o.source, path, o.line, 0, std::move(msg)});
  };
  // "checkpoint.resume = none (default)": a value and where it came from, for messages about
  // another key that depends on it.
  auto value_of = [&](const std::string& path, const std::string& shown) {
    return fmt::format("{} = {} ({})", path, shown, loaded.origin.at(path).to_string());
  };
  const auto& m = s.model;
  auto& p = s.parallel;

  for (const Problem& pr : cross_field_problems(s)) fail(pr.key, pr.message);
  // A partition list fixes an auto pipeline degree: --print-config names the list as its origin.
  if (p.partition.kind == PartitionKind::kList && p.pipeline == kAuto) {
    p.pipeline = static_cast<int>(p.partition.layers.size());
    Origin from = loaded.origin.at("parallel.partition");
    from.derived_from = "parallel.partition";
    loaded.origin["parallel.pipeline"] = from;
  }
  if (!s.checkpoint.init_from.empty() && s.checkpoint.resume == ResumeMode::kPath)
    fail("checkpoint.init_from",
         fmt::format("checkpoint.init_from = {} starts a fresh run from a Hugging Face checkpoint, but {} names a "
                     "checkpoint to continue; accepted: one of them (checkpoint.resume auto resumes when a checkpoint "
                     "exists and starts from checkpoint.init_from otherwise)",
                     s.checkpoint.init_from, value_of("checkpoint.resume", s.checkpoint.resume_path)));
  if (s.checkpoint.weights_only && s.checkpoint.resume == ResumeMode::kNone)
    fail("checkpoint.weights_only",
         fmt::format("checkpoint.weights_only = true needs a checkpoint to load, but {}; accepted: checkpoint.resume "
                     "auto or a checkpoint folder (--resume auto or --resume PATH)",
                     value_of("checkpoint.resume", "none")));
  if (s.data.source == DataSource::kFiles && s.data.train.empty())
    fail("data.train", "data.source is 'files' but data.train lists no token file");
  if (s.data.source == DataSource::kSynthetic && m.vocab_size < 257)
    fail("model.vocab_size", fmt::format("model.vocab_size = {} is too small for the synthetic byte-level data, "
                                         "which needs at least 257 (256 bytes + end-of-text)", m.vocab_size));
  if (s.data.source == DataSource::kSynthetic && !s.data.train.empty())
    fail("data.train", "data.train lists files but data.source is 'synthetic'; set data.source: files to use them");
  const std::string& r = s.cluster.rendezvous;
  if (r != "auto" && r.rfind("tcp://", 0) != 0 && r.rfind("file://", 0) != 0)
    fail("cluster.rendezvous", fmt::format("'{}' is not accepted, expected auto, tcp://HOST:PORT or file:///PATH", r));
  if (s.job.output_dir.empty()) fail("job.output_dir", "job.output_dir must not be empty");
}

}  // namespace holmes::spec
