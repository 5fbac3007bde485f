// The model a job spec describes: model.* as a model::GptConfig (the whole model: tp = 1, one
// stage) of its architecture, with the options that architecture reads (model::ConfigOption)
// taken from the spec and the others left at the model's defaults. The planner counts it
// (model/counts.hpp), the trainer shards it.
#pragma once

#include "engine/spec/job_spec.hpp"
#include "model/gpt_config.hpp"

namespace holmes::spec {

// Finalized. Throws holmes::UserError (model config: KEY = VALUE is invalid; expected ...) for a
// model the architecture does not run; a validated spec (validate.hpp) gives none.
model::GptConfig model_config(const ModelSection& m);
// The same before finalize(): sizes as the spec gives them (0 left open), for validation.
model::GptConfig raw_model_config(const ModelSection& m);

}  // namespace holmes::spec
