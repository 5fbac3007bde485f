// Loading a job spec: YAML file (or the embedded default) + `--set key.path=value`
// overrides -> validated JobSpec, with the source of every value kept for --print-config.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "engine/spec/job_spec.hpp"

namespace holmes::spec {

// Where a resolved value came from.
struct Origin {
  std::string source;  // "default", the config file path, or "--set"
  int line = 0;        // 1-based line in the file; 0 for defaults and --set
};

struct LoadedSpec {
  JobSpec spec;
  std::map<std::string, Origin> origin;  // key path -> where its value came from
};

// `file` empty = the embedded default job. Throws ConfigError listing every problem found
// (UserError when the file cannot be read).
LoadedSpec load_job_spec(const std::string& file, const std::vector<std::string>& sets);

// Resolved spec as YAML with a comment per value saying where it came from.
std::string print_resolved(const LoadedSpec& loaded);
// The resolved spec as YAML without origins (every value "training run"): what checkpoint
// manifests and final/job.yaml hold, and what start-up digests to compare ranks.
std::string resolved_spec_text(const JobSpec& spec);

// The YAML text of the embedded default job (small GPT on synthetic data).
const std::string& embedded_default_yaml();

}  // namespace holmes::spec
