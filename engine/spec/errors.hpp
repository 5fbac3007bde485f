// Errors of job specs: every problem found, with file, YAML path and line. The base
// (UserError, exit code 2) lives in common/errors.hpp.
#pragma once

#include <string>
#include <vector>

#include "common/errors.hpp"

namespace holmes {

// One problem in a job spec: where it is and what is wrong.
struct ConfigIssue {
  std::string file;     // config file, "--set", a flag (--resume) or "" for cross-field checks
  std::string path;     // YAML path such as "train.micro_batch"; "" for the whole file
  int line = 0;         // 1-based; 0 when unknown (command line, defaults)
  int column = 0;       // 1-based; 0 when unknown
  std::string message;  // what was wrong, the value seen, what is accepted

  std::string to_string() const;
};

// "TITLE: <the one problem>" or "TITLE (N problems):" with one indented line per problem:
// how every loader of a user file (job spec, topology file) reports what it found.
std::string format_issues(const std::string& title, const std::vector<ConfigIssue>& issues);

// All problems found in a job spec, reported together.
class ConfigError : public UserError {
 public:
  explicit ConfigError(std::vector<ConfigIssue> issues);
  const std::vector<ConfigIssue>& issues() const { return issues_; }

 private:
  std::vector<ConfigIssue> issues_;
};

}  // namespace holmes
