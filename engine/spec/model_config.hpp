// The model a job spec describes: model.* as a finalized model::GptConfig (the whole model:
// tp = 1, one stage). The planner counts it (model/counts.hpp), the trainer shards it.
#pragma once

#include "engine/spec/job_spec.hpp"
#include "model/gpt_config.hpp"

namespace holmes::spec {

// Throws holmes::UserError (model config: KEY = VALUE is invalid; expected ...) for a model
// the architecture does not run; a validated spec (validate.hpp) gives none.
model::GptConfig model_config(const ModelSection& m);

}  // namespace holmes::spec
