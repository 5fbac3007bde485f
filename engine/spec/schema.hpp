// The job-spec schema: every key a job file may hold, its type, default, accepted values and
// meaning, listed once. Loading, --set, --print-config and docs/job-spec.md all read it.
#pragma once

#include <yaml-cpp/yaml.h>

#include <functional>
#include <string>
#include <vector>

#include "engine/spec/job_spec.hpp"

namespace holmes::spec {

struct Field {
  std::string path;          // "train.micro_batch"
  std::string type;          // for messages and docs: "integer >= 1", "one of cpu, cuda", ...
  std::string default_yaml;  // YAML text of the default; unused when required
  bool required = false;
  std::string doc;
  // Stores `value` into the spec; returns "" or what is wrong (value seen, what is accepted).
  std::function<std::string(JobSpec&, const YAML::Node& value)> apply;
  // The resolved value as YAML text, for --print-config.
  std::function<std::string(const JobSpec&)> show;
};

// All fields, grouped by section in the order they are printed and documented.
const std::vector<Field>& schema();
const Field* find_field(const std::string& path);
// The first field whose last path component is `leaf` ("layers" -> model.layers), or nullptr:
// where a key given in the wrong place (or as a command-line option) was probably meant.
const Field* find_field_by_leaf(const std::string& leaf);

// True when `path` names a section or sub-section ("model", "data.synthetic").
bool is_group(const std::string& path);
// Direct children (last path component) of a group; "" is the root.
std::vector<std::string> children_of(const std::string& group);

// The reference table of all keys as Markdown (docs/job-spec.md is checked against it).
std::string schema_markdown();

}  // namespace holmes::spec
