// A run remembers its tokenizer: the data's (engine/data/data.hpp) goes into
// RunPaths::tokenizer (and <checkpoint.dir>/tokenizer when checkpoints live elsewhere)
// when the run starts, and its hash into every checkpoint manifest, so sample, eval and
// export find it (engine/tools/model_tokenizer.hpp) without being told.
#pragma once

#include <optional>

#include "engine/checkpoint/checkpoint.hpp"
#include "engine/data/data.hpp"
#include "engine/spec/job_spec.hpp"

namespace holmes::train {

// What the manifests record: hash, name and ids of the data's tokenizer (hash 0: unknown).
checkpoint::RunTokenizer run_tokenizer_of(const data::DataSet& data);

// Resuming a checkpoint trained on tokens of another tokenizer would feed the model ids that
// mean other words: UserError naming both, before anything is written.
void check_resume_tokenizer(const std::optional<checkpoint::CheckpointInfo>& resume, const data::DataSet& data);

// Rank 0 after claiming the output folder: copies the data's tokenizer into the run's folders.
// Data without a known tokenizer: nothing (and says so).
void keep_run_tokenizer(const spec::JobSpec& spec, const data::DataSet& data);

}  // namespace holmes::train
