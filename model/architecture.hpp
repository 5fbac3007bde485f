// One decoder architecture (model.arch) behind a small interface, and the registry that finds
// it by name. Everything that differs between architectures lives in its folder
// model/<arch>/: the configuration rules and defaults, the per-layer tensors (the embedding,
// the final norm and the LM head are the same for all: param_layout.hpp), how each tensor
// starts, the counts (counts.hpp) and per-layer buffers, the block's forward, replay and
// backward written from Kernels ops (block.hpp), and the Hugging Face name map (hf_map.hpp).
// model::Gpt, the checkpoint, export and the planner ask the registry; none of them names an
// architecture.
//
// Adding one (docs/extending.md walks through it): a folder with a class deriving from
// Architecture, and one registration: a line in builtin_architectures() (architecture.cpp) for
// an architecture the binary ships, or register_architecture() from a program that links it
// (test/arch/gptj/ registers a test-only one this way).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "device/device_memory.hpp"
#include "model/counts.hpp"
#include "model/gpt_config.hpp"
#include "model/param_layout.hpp"

namespace holmes::model {

class Blocks;  // block.hpp
class HfMap;   // hf_map.hpp

// The optional keys of a model configuration (GptConfig; model.* of a job spec) an
// architecture reads; a job spec that sets another to anything but its default is refused.
enum ConfigOption : unsigned {
  kKvHeads = 1u << 0,        // kv_heads: grouped-query attention
  kFfnHidden = 1u << 1,      // ffn_hidden, ffn_multiple: the MLP width
  kRopeTheta = 1u << 2,      // rope_theta: rotary positions
  kNormEps = 1u << 3,        // norm_eps: the norms' epsilon
  kTieEmbeddings = 1u << 4,  // tie_embeddings: the LM head is the token embedding, or its own
};

// A tensor of one layer as an architecture lays it out: shard and full shapes, weight decay and
// the tensor-parallel split (ParamTensor has the meaning of each; ParamLayout adds offsets).
struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape, full_shape;
  bool weight_decay = false;
  int split_dim = -1;
  int split_parts = 1;
};

// How a tensor starts (Gpt::init_weights): zeros, ones or N(0, std^2) drawn per element of the
// full tensor.
struct InitRule {
  enum Kind { kZero, kOne, kNormal } kind = kZero;
  float std = 0.0f;
};

// A problem of a job spec's model keys: the key and the message (engine/spec prefixes the file
// and line).
struct SpecProblem {
  std::string key, message;
};

class Architecture {
 public:
  virtual ~Architecture() = default;

  // ---- identity and configuration ----
  virtual const char* name() const = 0;   // model.arch: "gpt2"
  virtual const char* label() const = 0;  // in GptConfig::to_string: "GPT"
  virtual unsigned options() const = 0;   // ConfigOption bits
  // What it fixes that an option it does not read would choose, for the message that refuses
  // such a key ("multi-head attention, an MLP of 4 x model.hidden, ...").
  virtual std::string fixed_choices() const = 0;
  // Its defaults and rules on top of GptConfig::finalize's generic ones (sizes, tp rank,
  // stages): derives what 0 leaves open (kv_heads, ffn_hidden) and throws holmes::UserError
  // ("model config: KEY = VALUE is invalid; expected ...") for what its kernels do not run.
  virtual void finalize(GptConfig& cfg) const = 0;
  // The job spec's problems with this architecture's keys, cfg as the spec gives it (not
  // finalized: 0 left open), tp = parallel.tensor (0: auto, the planner picks a divisor).
  virtual std::vector<SpecProblem> spec_problems(const GptConfig& cfg, int tp) const;
  // The sizes a tensor-parallel degree must divide, as (job-spec key, value): model.heads, and
  // what else the architecture splits.
  virtual std::vector<std::pair<std::string, int64_t>> tp_divides(const GptConfig& cfg) const;
  // The global model for logs: "GPT-2 L=12 C=768 NH=12 V=50257 (padded 50304)".
  virtual std::string describe(const GptConfig& cfg) const = 0;

  // ---- parameters (param_layout.hpp) ----
  // Names of the tensors every architecture has: the token embedding, learned positions ("":
  // none), the final norm's weight and bias ("": none) and an untied LM head (its name when
  // untied; the embedding's name when tied).
  virtual RoleNames role_names(const GptConfig& cfg) const = 0;
  // The tensors of global layer `layer` of the shard cfg describes, in buffer order.
  virtual std::vector<TensorSpec> layer_tensors(const GptConfig& cfg, int layer) const = 0;
  virtual InitRule init_rule(const GptConfig& cfg, const ParamTensor& t) const = 0;
  virtual NormKind final_norm() const = 0;

  // ---- counts (counts.hpp), of the shard cfg describes ----
  virtual BlockCounts block_counts(const GptConfig& cfg) const = 0;
  // Per-layer buffers for a micro-batch of N rows, in the order its block indexes them.
  virtual std::vector<LayerBuffer> layer_buffers(const GptConfig& cfg, int64_t N, const AttentionPlan& att) const = 0;
  // Elements (activation type) of each gradient scratch buffer its backward uses besides the
  // model's (BlockIo::scratch), shared by every layer.
  virtual std::vector<int64_t> gradient_scratch(const GptConfig& cfg, int64_t N) const = 0;

  // ---- the block (block.hpp) ----
  // The block of one model shard: per-model state (a rotary table in `mem`, for positions up
  // to max_T) lives in it.
  virtual std::unique_ptr<Blocks> make_blocks(const GptConfig& cfg, device::DeviceMemory& mem, int max_T) const = 0;

  // ---- elsewhere ----
  // The Hugging Face name map (export, --init-from); nullptr: this architecture has none.
  virtual const HfMap* hugging_face() const { return nullptr; }
  // The weights-file version (engine/checkpoint/model_file.cpp) this architecture's files had
  // before the files named their architecture: 2 gpt2, 3 llama; 0 for the architectures added
  // since, whose files name theirs.
  virtual int legacy_file_version() const { return 0; }
};

// ---- the registry ----
// Adds an architecture; std::invalid_argument when its name is taken. Call before the
// architecture is used (a program's start, a test binary's static initialisation).
void register_architecture(std::unique_ptr<Architecture> arch);
// nullptr when no architecture is called `name`.
const Architecture* find_architecture(std::string_view name);
// The architecture called `name`; holmes::UserError naming the value and the accepted ones.
const Architecture& architecture(std::string_view name);
// Registered names, the built-in ones first (gpt2, llama), then in registration order.
std::vector<std::string> architecture_names();
// Registered architectures, in the same order.
std::vector<const Architecture*> architectures();

// True when tensor-parallel degree tp divides every size of Architecture::tp_divides.
bool tp_divides(const GptConfig& cfg, int tp);

}  // namespace holmes::model
