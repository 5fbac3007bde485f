// Slurm hostlist expansion and compression. Expected lists follow `scontrol show hostnames`.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <set>

#include "common/errors.hpp"
#include "engine/topo/hostlist.hpp"

using holmes::UserError;
using holmes::topo::compress_hostlist;
using holmes::topo::expand_hostlist;
using V = std::vector<std::string>;

TEST_CASE("hostlist expansion", "[unit][topo]") {
  CHECK(expand_hostlist("node[01-04,07],gpu-a[1-2]") == V{"node01", "node02", "node03", "node04", "node07", "gpu-a1", "gpu-a2"});
  CHECK(expand_hostlist("a[1-2]b[3-4]") == V{"a1b3", "a1b4", "a2b3", "a2b4"});
  CHECK(expand_hostlist("n[8-11]") == V{"n8", "n9", "n10", "n11"});
  CHECK(expand_hostlist("n[08-11]") == V{"n08", "n09", "n10", "n11"});
  CHECK(expand_hostlist("n[098-101]") == V{"n098", "n099", "n100", "n101"});
  CHECK(expand_hostlist("n[0-2]") == V{"n0", "n1", "n2"});
  CHECK(expand_hostlist("host") == V{"host"});
  CHECK(expand_hostlist("n[3]") == V{"n3"});
  CHECK(expand_hostlist("n[1-2]-ib") == V{"n1-ib", "n2-ib"});
  CHECK(expand_hostlist("rack[1-2]-n[1,3]") == V{"rack1-n1", "rack1-n3", "rack2-n1", "rack2-n3"});
  CHECK(expand_hostlist("a,b c") == V{"a", "b", "c"});
  CHECK(expand_hostlist("a,a") == V{"a", "a"});  // duplicates kept, as scontrol does
  CHECK(expand_hostlist("[1-3]") == V{"1", "2", "3"});
  CHECK(expand_hostlist("x[5,1-2]") == V{"x5", "x1", "x2"});  // listed order, not sorted
}

TEST_CASE("bad hostlists name the expression", "[unit][topo]") {
  for (const char* bad : {"n[1-", "n1-2]", "n[a-b]", "n[3-1]", "", ",", "n[[1]]", "n[1-2]]", "a,,b", "n[]",
                          "n[1-]", "n[-1]", "n[1 -2]", "n[1-2000000]", "n[1-1000]m[1-2000]"}) {
    INFO("expression: '" << bad << "'");
    try {
      expand_hostlist(bad);
      FAIL("no error");
    } catch (const UserError& e) {
      CHECK_THAT(e.what(), Catch::Contains(std::string("hostlist '") + bad + "'"));
    }
  }
}

TEST_CASE("hostlist compression", "[unit][topo]") {
  CHECK(compress_hostlist({"n1", "n2", "n3", "n5", "x"}) == "n[1-3,5],x");
  CHECK(compress_hostlist({"node07", "node01", "node02", "node03", "node04"}) == "node[01-04,07]");
  CHECK(compress_hostlist({"a"}) == "a");
  CHECK(compress_hostlist({"a1"}) == "a1");
  CHECK(compress_hostlist({"n9", "n10", "n11"}) == "n[9-11]");
  CHECK(compress_hostlist({"gpu-a1", "gpu-a2", "cpu1", "gpu-a1"}) == "gpu-a[1-2],cpu1");
  CHECK(compress_hostlist({}).empty());
}

TEST_CASE("expand(compress(names)) gives back the same set of names", "[unit][topo]") {
  std::mt19937 rng(1234);
  const std::vector<std::string> prefixes = {"n", "gpu-a", "rack1-n", "x"};
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<std::string> names;
    int count = 1 + static_cast<int>(rng() % 30);
    for (int i = 0; i < count; ++i) {
      std::string p = prefixes[rng() % prefixes.size()];
      int v = static_cast<int>(rng() % 120);
      bool pad = rng() % 2;
      names.push_back(pad ? p + (v < 10 ? "00" : v < 100 ? "0" : "") + std::to_string(v) : p + std::to_string(v));
    }
    std::string text = compress_hostlist(names);
    auto back = expand_hostlist(text);
    std::set<std::string> want(names.begin(), names.end()), got(back.begin(), back.end());
    INFO("compressed: " << text);
    CHECK(got == want);
    CHECK(back.size() == want.size());  // no duplicates after compression
  }
}
