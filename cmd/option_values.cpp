#include "cmd/option_values.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace holmes::cmd {

std::string accepted_range(bool integer, const std::string& lower, const std::string& upper) {
  const char* what = integer ? "an integer" : "a number";
  return upper.empty() ? fmt::format("{} >= {}", what, lower) : fmt::format("{} in [{}, {}]", what, lower, upper);
}

std::string rejected_value(const std::string& seen, bool integer, bool parsed, const std::string& accepted) {
  if (!parsed) return fmt::format("'{}' is not {}; accepted: {}", seen, integer ? "an integer" : "a number", accepted);
  return fmt::format("{} is out of range; accepted: {}", seen, accepted);
}

CLI::Validator one_of(std::vector<std::string> accepted) {
  const std::string list = fmt::format("{}", fmt::join(accepted, ", "));
  return CLI::Validator(
      [accepted, list](std::string& text) -> std::string {
        if (std::find(accepted.begin(), accepted.end(), text) != accepted.end()) return "";
        return fmt::format("'{}' is not accepted; accepted: {}", text, list);
      },
      "{" + fmt::format("{}", fmt::join(accepted, ",")) + "}");
}

}  // namespace holmes::cmd
