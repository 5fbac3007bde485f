// The leader's wait after a failure, shared by elastic replicas (elastic.hpp) and a re-planned
// pipeline (replan.hpp): the survivors register alive in the store, one key each.
#pragma once

#include <string>
#include <vector>

#include "comm/store.hpp"

namespace holmes::runtime {

// Waits until every key of `keys` is set, or no new one was set for `settle_s` (a rank that
// died never registers), at most `bound_s` in all; returns the keys still missing.
std::vector<std::string> wait_for_registrations(comm::Store& store, const std::vector<std::string>& keys,
                                                double settle_s, double bound_s);

}  // namespace holmes::runtime
