// The plain weights file written at the end of a run whose model sits whole on one rank
// (<output_dir>/final/model.bin): one file `sample`, `eval` and `export` read without the
// checkpoint machinery (checkpoint.hpp holds the sharded, resumable format).
//
// Layout (little-endian): 8 bytes "HOLMESW1"; int32 version (2), L, C, NH, V, Vp,
// max_seq_len, CRC32C of the P floats (version 1 had 0 there: no checksum); int64 parameter
// count P; then P floats: the flat parameter buffer of a tp = 1, single-stage GPT in
// model/param_layout.hpp order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/gpt.hpp"
#include "model/gpt_config.hpp"

namespace holmes::checkpoint {

struct ModelWeights {
  model::GptConfig config;
  std::vector<float> params;
};

// Throws std::runtime_error when the file cannot be written.
void save_model_weights(const std::string& path, const model::Gpt& gpt);
// The same from a whole single-rank shard's config and flat buffer [count].
void save_model_weights(const std::string& path, const model::GptConfig& config, const float* params, size_t count);
// The size of the file save_model_weights writes for `count` parameters of `config`.
uint64_t model_weights_bytes(const model::GptConfig& config, size_t count);
// Throws UserError naming the file when it is missing, truncated, longer than its header
// says, corrupted (checksum) or not a weights file. A version 1 file (no checksum) is read
// with a warning.
ModelWeights load_model_weights(const std::string& path);

}  // namespace holmes::checkpoint
