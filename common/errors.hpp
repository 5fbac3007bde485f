// The error base every layer throws for bad user input. `main` maps UserError (and its
// subclasses: ConfigError for job specs, TopologyError in engine/topo, ...) to exit code 2;
// any other exception is a runtime failure (exit 1). Every message says what was wrong, the
// value seen and what would be accepted. ConfigIssue is how every loader of a user file (job
// spec, topology, calibration) reports one problem with its place.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace holmes {

// Bad input from the user: a config, a flag, a topology or data file. Exit code 2.
class UserError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad command-line usage that CLI11 does not catch itself (conflicting flags, ...).
class UsageError : public UserError {
 public:
  using UserError::UserError;
};

// One problem in a user's file: where it is and what is wrong.
struct ConfigIssue {
  std::string file;     // config file, "--set", a flag (--resume) or "" for cross-field checks
  std::string path;     // YAML path such as "train.micro_batch"; "" for the whole file
  int line = 0;         // 1-based; 0 when unknown (command line, defaults)
  int column = 0;       // 1-based; 0 when unknown
  std::string message;  // what was wrong, the value seen, what is accepted

  std::string to_string() const;
};

// "TITLE: <the one problem>" or "TITLE (N problems):" with one indented line per problem.
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
