// The spellings of data.train and data.valid (docs/job-spec.md):
//   data.train: web.bin                      one source, one file
//   data.train: [a.bin, b.bin]               one source, its files read one after the other
//   data.train:                              a mixture: each entry a source with its weight
//     - {path: web, weight: 0.7, name: web}  (path: a file or a list; name: default the file's)
//     - {path: [code1.bin, code2.bin], weight: 0.3}
//   data.train: [0.7, web, 0.3, code]        the same mixture as Megatron-LM's --data-path
// Weights count training tokens; they are normalised to sum to 1. Names are the metric keys of
// the per-source validation losses: letters, digits, '.', '_' and '-', unique.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "engine/spec/job_spec.hpp"

namespace holmes::spec {

// Parses `v` into *out (names filled in, weights as given); "" or what is wrong (the element,
// the value seen, what is accepted).
std::string parse_data_sources(const YAML::Node& v, std::vector<DataSourceSpec>* out);
// The YAML --print-config shows: the path list for one unweighted source (the old spelling),
// else the list of {name, path, weight} mappings; it parses back to the same sources.
std::string show_data_sources(const std::vector<DataSourceSpec>& sources);
// The name a source gets from its first file: "web" for "data/web.bin", "web.idx" or "web".
std::string source_name_of(const std::string& path);

}  // namespace holmes::spec
