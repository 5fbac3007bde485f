#include "common/errors.hpp"

#include <fmt/format.h>

namespace holmes {

std::string ConfigIssue::to_string() const {
  std::string where = file;
  if (line > 0) where += column > 0 ? fmt::format(":{}:{}", line, column) : fmt::format(":{}", line);
  if (!path.empty()) where += where.empty() ? path : ": " + path;
  return where.empty() ? message : where + ": " + message;
}

std::string format_issues(const std::string& title, const std::vector<ConfigIssue>& issues) {
  std::string out = issues.size() == 1 ? title + ": " : fmt::format("{} ({} problems):", title, issues.size());
  for (const auto& i : issues) out += (issues.size() == 1 ? "" : "\n  ") + i.to_string();
  return out;
}

ConfigError::ConfigError(std::vector<ConfigIssue> issues)
    : UserError(format_issues("invalid job spec", issues)), issues_(std::move(issues)) {}

}  // namespace holmes
