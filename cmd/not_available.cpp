// Shared answer of a subcommand whose implementation lands with later work: it says so
// plainly and never pretends to have done the work.
#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "cmd/commands.hpp"

namespace holmes::cmd {

int not_available(const char* what) {
  fmt::print(stderr, "holmes-train: `{}` is not available in this build yet\n", what);
  return 1;
}

}  // namespace holmes::cmd
