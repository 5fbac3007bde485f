// The plan's NCCL variables against the environment (engine/runtime/nccl_env.hpp): the
// user's values win and are reported, variables that break the groups are refused, the
// variables are set once.
#include <catch2/catch.hpp>

#include <cstdlib>

#include "common/errors.hpp"
#include "engine/plan/nccl.hpp"
#include "engine/runtime/nccl_env.hpp"
#include "test/support/cluster_gen.hpp"

namespace hp = holmes::plan;
namespace ht = holmes::topo;
using holmes::runtime::EnvMap;

namespace {

// An IB island and a RoCE island of two 2-GPU nodes each.
hp::Plan two_islands() {
  auto t = hp::testing::make_cluster({{ht::NicKind::kIb, 2, 2}, {ht::NicKind::kRoce, 2, 2}});
  return hp::make_plan(hp::testing::make_spec(4, 64, 4, 2, 2, 2, 1, 8, 32), t);
}

std::string message_of(const EnvMap& env) {
  try {
    holmes::runtime::refuse_nccl_overrides(env);
  } catch (const holmes::UserError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("the plan's values apply where the user set nothing, the user's win and are reported", "[nccl_env]") {
  const hp::Plan p = two_islands();
  const int roce_node = 2;
  auto planned = hp::nccl_env(p, roce_node);
  REQUIRE(planned.size() == 4);  // HCA, GID index, interface, family
  auto vars = holmes::runtime::resolve_nccl_env(p, roce_node, {{"PATH", "/bin"}, {"NCCL_IB_GID_INDEX", ""}});
  REQUIRE(vars.size() == planned.size());
  for (size_t i = 0; i < vars.size(); ++i) {
    CHECK(vars[i].name == planned[i].name);
    CHECK(vars[i].value == planned[i].value);  // an empty variable counts as unset
    CHECK_FALSE(vars[i].user);
  }
  vars = holmes::runtime::resolve_nccl_env(p, roce_node, {{"NCCL_IB_GID_INDEX", "5"}, {"NCCL_SOCKET_IFNAME", "=eth0"}});
  for (const auto& v : vars) {
    if (v.name == "NCCL_IB_GID_INDEX") {
      CHECK(v.user);
      CHECK(v.value == "5");
      CHECK(v.planned == "3");
    } else if (v.name == "NCCL_SOCKET_IFNAME") {
      CHECK(v.user);
      CHECK(v.value == v.planned);
    } else {
      CHECK_FALSE(v.user);
    }
  }
  auto lines = holmes::runtime::describe_nccl_env(vars);
  REQUIRE(lines.size() == vars.size());
  CHECK(lines[0].rfind("nccl env: NCCL_IB_HCA==mlx5_0:1 (", 0) == 0);
  CHECK(lines[1] == "nccl env: NCCL_IB_GID_INDEX=5 set by the user wins over the plan's 3 (the RoCE v2 GID with an "
                    "IPv4 address that discovery found)");
  CHECK(lines[2] == "nccl env: NCCL_SOCKET_IFNAME==eth0 (set by the user, as planned)");
}

TEST_CASE("NCCL_NET is refused with exit code 2, saying why, empty or absent is accepted", "[nccl_env]") {
  const std::string msg = message_of({{"NCCL_NET", "Socket"}});
  CHECK(msg.find("NCCL_NET='Socket' is set") != std::string::npos);
  CHECK(msg.find("config.netName") != std::string::npos);
  CHECK(msg.find("unset NCCL_NET") != std::string::npos);
  CHECK(message_of({{"NCCL_NET", ""}}).empty());
  CHECK(message_of({}).empty());
  CHECK_THROWS_AS(holmes::runtime::resolve_nccl_env(two_islands(), 0, {{"NCCL_NET", "IB"}}), holmes::UserError);
}

TEST_CASE("apply_nccl_env sets the variables once per process and refuses another set", "[nccl_env]") {
  const hp::Plan p = two_islands();
  unsetenv("NCCL_IB_HCA");
  unsetenv("NCCL_IB_GID_INDEX");
  unsetenv("NCCL_SOCKET_FAMILY");
  unsetenv("NCCL_NET");
  setenv("NCCL_SOCKET_IFNAME", "=mine0", 1);
  auto first = holmes::runtime::apply_nccl_env(p, 0);  // an IB node: no GID index
  CHECK(std::string(std::getenv("NCCL_IB_HCA")) == "=mlx5_0:1");
  CHECK(std::string(std::getenv("NCCL_SOCKET_FAMILY")) == "AF_INET");
  CHECK(std::string(std::getenv("NCCL_SOCKET_IFNAME")) == "=mine0");  // the user's stays
  CHECK(std::getenv("NCCL_IB_GID_INDEX") == nullptr);
  auto again = holmes::runtime::apply_nccl_env(p, 1);  // node 1 of the same island: same values
  REQUIRE(again.size() == first.size());
  for (size_t i = 0; i < again.size(); ++i) CHECK(again[i].user == first[i].user);
  // The RoCE island's values would differ: NCCL would never see them.
  CHECK_THROWS_AS(holmes::runtime::apply_nccl_env(p, 2), std::logic_error);
}

TEST_CASE("variables that would break the groups are refused, naming them and what is accepted", "[nccl_env]") {
  CHECK(message_of({{"NCCL_COMM_BLOCKING", ""}, {"NCCL_COMM_BLOCKING_X", "1"}}).empty());
  CHECK(message_of({{"NCCL_COMM_BLOCKING", "0"}}).empty());
  CHECK_THAT(message_of({{"NCCL_COMM_BLOCKING", "1"}}),
             Catch::Contains("NCCL_COMM_BLOCKING='1'") && Catch::Contains("accepted: not set, empty or 0"));
  CHECK(message_of({{"NCCL_HOSTID", "node7"}}).empty());
  CHECK_THAT(message_of({{"NCCL_HOSTID", ""}}), Catch::Contains("NCCL_HOSTID is exported but empty"));
  CHECK_THAT(message_of({{"HOLMES_NCCL", "1"}}), Catch::Contains("HOLMES_NCCL='1' is no longer read") &&
                                                     Catch::Contains("parallel.nccl"));
  CHECK_THAT(message_of({{"HOLMES_NCCL_SHARED_GPU", "1"}}), Catch::Contains("parallel.nccl"));
  // resolve_nccl_env refuses before it resolves anything.
  CHECK_THROWS_AS(holmes::runtime::resolve_nccl_env(two_islands(), 0, {{"NCCL_COMM_BLOCKING", "1"}}),
                  holmes::UserError);
}
