#include "engine/spec/scalar.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>

namespace holmes::spec {

std::string describe(const YAML::Node& v) {
  if (!v.IsDefined() || v.IsNull()) return "an empty value";
  if (v.IsMap()) return "a mapping";
  if (v.IsSequence()) return "a list";
  return "'" + v.Scalar() + "'";
}

std::string parse_int(const YAML::Node& v, int64_t* out) {
  if (!v.IsScalar()) return describe(v) + " is not accepted";
  const std::string& s = v.Scalar();
  // Allow digit separators people write in configs: 2_000_000.
  std::string digits;
  for (char c : s)
    if (c != '_') digits += c;
  const char* end = digits.data() + digits.size();
  auto [p, ec] = std::from_chars(digits.data(), end, *out);
  if (ec == std::errc::result_out_of_range) return "'" + s + "' is too large";
  if (ec == std::errc() && p == end && !digits.empty()) return "";
  // 1e6 style integers are fine when exact.
  double d = 0;
  auto [q, ec2] = std::from_chars(digits.data(), end, d);
  if (ec2 == std::errc() && q == end && std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e18) {
    *out = static_cast<int64_t>(d);
    return "";
  }
  // 1e99 is a whole number, only beyond any integer: say so rather than "not an integer".
  // (An exponent out of a double's range too; a negative one, 1e-400, is a tiny fraction.)
  const auto e = digits.find_first_of("eE");
  const bool huge = q == end && e != std::string::npos && digits.compare(e + 1, 1, "-") != 0 &&
                    (ec2 == std::errc::result_out_of_range || (ec2 == std::errc() && std::fabs(d) >= 9.0e18));
  if (huge) return "'" + s + "' is too " + (digits[0] == '-' ? "small" : "large") + " for an integer";
  return "'" + s + "' is not an integer";
}

std::string parse_real(const YAML::Node& v, double* out) {
  if (!v.IsScalar()) return describe(v) + " is not accepted";
  const std::string& s = v.Scalar();
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, *out);
  if (ec == std::errc() && p == end && !s.empty() && std::isfinite(*out)) return "";
  return "'" + s + "' is not a number";
}

std::string parse_string(const YAML::Node& v, std::string* out) {
  if (!v.IsDefined() || v.IsNull()) return describe(v) + " is not accepted";
  if (!v.IsScalar()) return describe(v) + " is not accepted";
  *out = v.Scalar();
  return "";
}

std::string parse_string_list(const YAML::Node& v, std::vector<std::string>* out) {
  out->clear();
  if (v.IsScalar()) {
    out->push_back(v.Scalar());
    return "";
  }
  if (!v.IsSequence()) return describe(v) + " is not accepted";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!v[i].IsScalar()) return fmt::format("element {} is {}", i, describe(v[i]));
    out->push_back(v[i].Scalar());
  }
  return "";
}

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) out += (i ? sep : "") + parts[i];
  return out;
}

}  // namespace holmes::spec
