// In-process ProcessGroup: the members are threads of one process sharing memory. Used by
// unit tests of everything above comm/ (and of comm/ itself: the same test body runs on
// this and on Gloo). It keeps the real contract: time-outs, size checks, a member that
// leaves (destroys its group) makes the others fail naming it.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "comm/process_group.hpp"

namespace holmes::comm {

namespace detail {
struct InProcState;
}

// Shared by all threads of one simulated job; groups are matched by GroupSpec::name.
class InProcessHub {
 public:
  std::shared_ptr<detail::InProcState> state_for(const GroupSpec& spec);

 private:
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<detail::InProcState>> groups_;
};

std::unique_ptr<ProcessGroup> make_inproc_group(const std::shared_ptr<InProcessHub>& hub, GroupSpec spec);

}  // namespace holmes::comm
