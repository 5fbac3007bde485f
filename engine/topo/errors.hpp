// Errors of the topology area. A TopologyError is user input (node reports or a topology
// file that disagree with each other), so main maps it to exit code 2 like any UserError.
#pragma once

#include "common/errors.hpp"

namespace holmes::topo {

class TopologyError : public UserError {
 public:
  using UserError::UserError;
};

}  // namespace holmes::topo
