// The liveness marks of an elastic job (engine/runtime/liveness.hpp) on a real TCP store: a
// rank that beats is there, one whose connection closed is gone at once, one whose beat stopped
// is gone once the beat is older than the bound, and one that leaves on purpose leaves no mark.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "comm/store.hpp"
#include "comm/tcp_store.hpp"
#include "engine/runtime/liveness.hpp"
#include "engine/runtime/settle.hpp"

using namespace holmes;
using Catch::Matchers::Contains;
using std::chrono::milliseconds;

TEST_CASE("liveness: beating, closed, stale and withdrawn ranks") {
  auto host = comm::TcpStore::host({"", 0, "tok", std::chrono::seconds(5)});
  auto client = [&] { return comm::TcpStore::connect({"127.0.0.1", host->port(), "tok", std::chrono::seconds(5)}); };

  CHECK_FALSE(runtime::rank_gone(*host, 7, 0.0));  // never beat: nothing known

  {
    auto store = client();
    runtime::Heartbeat beat(store, 1, 0.02);
    CHECK_FALSE(runtime::rank_gone(*host, 1, 30.0));
    // The beat goes on: what was written 1 s before is rewritten.
    const std::string first = comm::get_string(*host, "elastic/live/1", milliseconds(1000));
    std::string now = first;
    for (int i = 0; i < 500 && now == first; ++i) {
      std::this_thread::sleep_for(milliseconds(10));
      now = comm::get_string(*host, "elastic/live/1", milliseconds(1000));
    }
    CHECK(now != first);
  }
  // The heartbeat withdrew its close request when it ended on purpose: rank 1 is not marked
  // closed, its last beat only grows old.
  std::this_thread::sleep_for(milliseconds(100));
  CHECK_THAT(comm::get_string(*host, "elastic/live/1", milliseconds(1000)), !Contains("closed"));
  const auto stale = runtime::rank_gone(*host, 1, 0.05);
  REQUIRE(stale);
  CHECK_THAT(*stale, Contains("last heartbeat was") && Contains("frozen or cut off"));
  CHECK_FALSE(runtime::rank_gone(*host, 1, 30.0));
  // It said it left: the leader does not wait for it though its beat is recent.
  CHECK(runtime::left_on_purpose(*host, 1));
  CHECK_FALSE(runtime::left_on_purpose(*host, 2));  // never beat
  {
    auto again = client();
    // The rank started again beats; what an earlier incarnation left does not count (set by
    // hand: this test's incarnations share their pid and host).
    runtime::Heartbeat beat(again, 1, 0.02);
    comm::set_string(*host, "elastic/left/1", "another-incarnation");
    CHECK_FALSE(runtime::left_on_purpose(*host, 1));
  }

  {
    auto store = client();
    store->on_close("elastic/live/3", {'9', ' ', 'c', 'l', 'o', 's', 'e', 'd'});
    comm::set_string(*store, "elastic/live/3", "9 1");
  }  // the connection closes with the request standing: a dead process
  for (int i = 0; i < 500 && !runtime::rank_gone(*host, 3, 1e12); ++i) std::this_thread::sleep_for(milliseconds(10));
  const auto closed = runtime::rank_gone(*host, 3, 1e12);
  REQUIRE(closed);
  CHECK_THAT(*closed, Contains("process ended"));
}

// The leader's wait (settle.hpp): a missing rank that is still alive is waited for beyond the
// settle window (it registers late: held up in a collective), one that is not alive is not.
TEST_CASE("settle: a rank still alive is waited for beyond the settle window, within the bound") {
  auto store = comm::TcpStore::host({"", 0, "tok", std::chrono::seconds(5)});
  const std::vector<std::string> keys{"alive/0", "alive/1"};
  comm::set_string(*store, "alive/0", "5");
  std::thread late([&] {
    std::this_thread::sleep_for(milliseconds(600));
    auto c = comm::TcpStore::connect({"127.0.0.1", store->port(), "tok", std::chrono::seconds(5)});
    comm::set_string(*c, "alive/1", "5");
  });
  auto missing = runtime::wait_for_registrations(*store, keys, 0.1, 10.0, {}, [](size_t i) { return i == 1; });
  late.join();
  CHECK(missing.empty());
  store->remove("alive/1");
  // Not alive: the settle window ends the wait without it.
  missing = runtime::wait_for_registrations(*store, keys, 0.1, 10.0, {}, [](size_t) { return false; });
  CHECK(missing == std::vector<std::string>{"alive/1"});
  // Alive but never registering: the bound ends the wait.
  const auto t1 = std::chrono::steady_clock::now();
  missing = runtime::wait_for_registrations(*store, keys, 0.1, 0.8, {}, [](size_t) { return true; });
  CHECK(missing == std::vector<std::string>{"alive/1"});
  CHECK(std::chrono::steady_clock::now() - t1 >= milliseconds(800));
}
