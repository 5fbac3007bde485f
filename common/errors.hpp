// The error base every layer throws for bad user input. `main` maps UserError (and its
// subclasses: ConfigError in engine/spec, TopologyError in engine/topo, ...) to exit code 2;
// any other exception is a runtime failure (exit 1). Every message says what was wrong, the
// value seen and what would be accepted.
#pragma once

#include <stdexcept>

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

}  // namespace holmes
