// Gloo over TCP ProcessGroup. Each group gets its own gloo::transport::tcp device bound to
// the interface or address the plan chose for it (the RDMA island's IP network inside an
// island, Ethernet across islands) and a full mesh of connections made through the job's
// Store under the key prefix "pg/<name>/", so any number of groups share one store.
#pragma once

#include <memory>
#include <string>

#include "comm/process_group.hpp"
#include "comm/store.hpp"

namespace holmes::comm {

struct GlooNet {
  // Bind to this interface ("eth0", "ib0"); wins over address. A comma-separated list (the
  // plan's Group::interface when nodes name their NICs differently) picks the first one
  // present on this machine.
  std::string iface;
  std::string address;  // or to this local IP / hostname ("127.0.0.1" in tests)
  // Both empty: Gloo resolves this machine's hostname.
};

// Collective: every member calls it with the same spec.name and global_ranks. Blocks
// until the mesh is connected or spec.timeout passes; then throws CommError("connect")
// naming the members that never arrived.
std::unique_ptr<ProcessGroup> make_gloo_group(const std::shared_ptr<Store>& store, GroupSpec spec,
                                              const GlooNet& net);

}  // namespace holmes::comm
