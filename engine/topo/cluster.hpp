// From node reports to the cluster picture: RDMA islands, each node's Ethernet rate, and
// what was assumed where the reports were incomplete. The link between two nodes is the
// planner's to price (plan::link_between: the island's RDMA inside one, Ethernet across).
//
// Island rule: a node joins the island of its best usable RDMA fabric (active ports of one
// kind on one fabric: IB subnet prefix, RoCE IPv4 subnet or a topology file's fabric name),
// best = highest aggregate rate, IB before RoCE on a tie. A node without an active RDMA port
// is an island of its own of kind Ethernet. Every node is also assumed to be on the one
// Ethernet network that joins all of them.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/topo/errors.hpp"
#include "engine/topo/topology.hpp"

namespace holmes::topo {

// Ethernet rate assumed for a node none of whose Ethernet ports says its speed (matches the
// planner's default, docs/topology.md).
inline constexpr double kAssumedEthernetGbps = 10;

// (kind, fabric) -> aggregate Gb/s of the node's active ports on it (unknown rates add 0).
using RdmaFabrics = std::map<std::pair<NicKind, std::string>, double>;
RdmaFabrics rdma_fabrics(const NodeReport& node);

// Reports gathered from every rank -> one per node, in order of first appearance (the ranks
// of one node report the same host). Throws TopologyError when two ranks report the same
// host name with different NICs or devices (two machines with one name).
std::vector<NodeReport> unique_nodes(const std::vector<NodeReport>& per_rank);

// A topology file given beside run-time discovery overrides it: a discovered node whose host
// name the file lists is replaced by the file's entry (the user knows better, e.g. a fabric
// name or a rate the driver does not report). File entries for hosts not in the job are
// ignored. `notes` (may be null) receives one line per replaced or ignored host group.
std::vector<NodeReport> overlay_reports(std::vector<NodeReport> discovered, const std::vector<NodeReport>& file,
                                        std::vector<std::string>* notes);

// The nodes of a job in its launch order (`names`, e.g. the expanded Slurm node list): a run
// numbers nodes, and so ranks, in that order, so a preview of the plan must use it too.
// Reports not named are left out. Throws TopologyError naming `source` and the hosts when a
// name has no report or is named twice.
std::vector<NodeReport> order_nodes(const std::vector<NodeReport>& reports, const std::vector<std::string>& names,
                                    const std::string& source);

// Throws TopologyError when there are no nodes, two nodes share a name, or nodes disagree on
// the device kind or count; softer disagreements become `warnings`.
ClusterTopology build_cluster(std::vector<NodeReport> nodes);

// Human-readable summary: islands, their members (as hostlists) and warnings.
std::string describe_cluster(const ClusterTopology& topo);

}  // namespace holmes::topo
