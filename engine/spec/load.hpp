// Loading a job spec: YAML file (or the embedded default) + `--set key.path=value`
// overrides -> validated JobSpec, with the source of every value kept for --print-config.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/spec/job_spec.hpp"

namespace holmes::spec {

// Where a resolved value came from.
struct Origin {
  std::string source;  // "default", the config file path, "--set" or the flag (--resume)
  int line = 0;        // 1-based line in the file; 0 for defaults and flags
  std::string derived_from;  // "" or the key this value was derived from (pipeline from partition)

  Origin(std::string source_ = "", int line_ = 0, std::string derived_from_ = "")
      : source(std::move(source_)), line(line_), derived_from(std::move(derived_from_)) {}

  // "job.yaml:12", "default", "--resume", "job.yaml:9 (from parallel.partition)".
  std::string to_string() const;
};

// A command-line flag that stands for a spec key (--resume for checkpoint.resume): applied
// after the --set overrides, and named as the value's origin in messages and --print-config.
struct FlagOverride {
  std::string flag;       // "--weights-only"
  std::string key_value;  // "checkpoint.weights_only=true"
};

struct LoadedSpec {
  JobSpec spec;
  std::map<std::string, Origin> origin;  // key path -> where its value came from
};

// `file` empty = the embedded default job. Throws ConfigError listing every problem found
// (UserError when the file cannot be read).
LoadedSpec load_job_spec(const std::string& file, const std::vector<std::string>& sets,
                         const std::vector<FlagOverride>& flags = {});

// Resolved spec as YAML with a comment per value saying where it came from.
std::string print_resolved(const LoadedSpec& loaded);
// The resolved spec as YAML without origins (every value "training run"): what checkpoint
// manifests and final/job.yaml hold, and what start-up digests to compare ranks.
std::string resolved_spec_text(const JobSpec& spec);

// The YAML text of the embedded default job (small GPT on synthetic data).
const std::string& embedded_default_yaml();

}  // namespace holmes::spec
