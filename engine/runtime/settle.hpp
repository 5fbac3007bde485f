// The leader's wait after a failure, shared by elastic replicas (elastic.hpp) and a re-planned
// pipeline (replan.hpp): the survivors register alive in the store, one key each.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "comm/store.hpp"

namespace holmes::runtime {

// Waits until every key of `keys` is set, or no new one was set for `settle_s` (a rank that
// died never registers), at most `bound_s` in all; returns the keys still missing. `coming`
// (empty, or one key per key of `keys`): a rank whose coming key is set said it is alive and
// on its way (elastic.hpp), so it is waited for beyond the settle window, within `bound_s`.
// `alive` (empty, or asked with a key's index, at most every 250 ms): a rank still alive
// (beating: held up in a collective that has not failed yet) is waited for alike.
std::vector<std::string> wait_for_registrations(comm::Store& store, const std::vector<std::string>& keys,
                                                double settle_s, double bound_s,
                                                const std::vector<std::string>& coming = {},
                                                const std::function<bool(size_t)>& alive = {});

}  // namespace holmes::runtime
