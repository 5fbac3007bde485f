// Strict conversion of YAML nodes to typed values. Each parser returns "" on success or a
// message naming the value seen ("'abc' is not an integer"); the caller adds what is accepted.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace holmes::spec {

inline constexpr int64_t kNoMax = std::numeric_limits<int64_t>::max();
inline constexpr double kRealMax = std::numeric_limits<double>::max();

// "a mapping", "a list", "an empty value" or the scalar quoted: for messages.
std::string describe(const YAML::Node& v);

std::string parse_int(const YAML::Node& v, int64_t* out);
std::string parse_real(const YAML::Node& v, double* out);
std::string parse_string(const YAML::Node& v, std::string* out);
std::string parse_string_list(const YAML::Node& v, std::vector<std::string>* out);

// Double-quoted YAML string with escapes.
std::string quote(const std::string& s);
std::string join(const std::vector<std::string>& parts, const std::string& sep);

}  // namespace holmes::spec
