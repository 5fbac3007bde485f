// Store tests: one body over the TCP store (loopback, free port) and the file store (a
// fresh temporary directory), plus token rejection, time-out messages and URL parsing.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <optional>
#include <thread>

#include "comm/errors.hpp"
#include "comm/file_store.hpp"
#include "comm/gloo_store.hpp"
#include "comm/socket.hpp"
#include "comm/store.hpp"
#include "comm/tcp_store.hpp"
#include "common/errors.hpp"

using namespace holmes::comm;
using Catch::Matchers::Contains;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

namespace {

// Fresh directories under /tmp, removed when the test program exits.
std::string temp_dir(const std::string& tag) {
  struct Made {
    std::vector<std::filesystem::path> paths;
    ~Made() {
      std::error_code ec;
      for (const auto& p : paths) std::filesystem::remove_all(p, ec);
    }
  };
  static Made made;
  static std::atomic<int> n{0};
  auto p = std::filesystem::temp_directory_path() /
           ("holmes-comm-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
  std::filesystem::remove_all(p);
  made.paths.push_back(p);
  return p.string();
}

// Two handles on one store, as two ranks would hold: (host, client) for TCP; two
// FileStore objects on one directory for files.
std::pair<std::shared_ptr<Store>, std::shared_ptr<Store>> two_handles(bool tcp) {
  if (tcp) {
    auto host = TcpStore::host({"", 0, "tok", std::chrono::seconds(5)});
    auto client = TcpStore::connect({"127.0.0.1", host->port(), "tok", std::chrono::seconds(5)});
    return {host, client};
  }
  auto dir = temp_dir("pair");
  return {std::make_shared<FileStore>(dir, "tok", milliseconds(5000)),
          std::make_shared<FileStore>(dir, "tok", milliseconds(5000))};
}

}  // namespace

TEST_CASE("store set, get, add, missing, remove and wait on TCP and file stores", "[comm]") {
  for (bool tcp : {true, false}) {
    DYNAMIC_SECTION((tcp ? "tcp" : "file")) {
      auto [a, b] = two_handles(tcp);
      set_string(*a, "rank/0", "hello");
      CHECK(get_string(*b, "rank/0", milliseconds(100)) == "hello");
      set_string(*b, "rank/0", "again");  // replaces
      CHECK(get_string(*a, "rank/0", milliseconds(100)) == "again");
      a->set("binary", {'\0', '\xff', 'x'});
      CHECK(b->get("binary", milliseconds(100)) == Bytes{'\0', '\xff', 'x'});
      CHECK(a->add("count", 2) == 2);
      CHECK(b->add("count", 5) == 7);
      CHECK(a->missing({"rank/0", "nope", "count"}) == std::vector<std::string>{"nope"});
      CHECK_THROWS_WITH(b->add("rank/0", 1), Contains("holds 'again', not an integer counter"));
      CHECK(a->add("count", 0) == 7);  // the store still serves after the refused add
      CHECK(b->remove("rank/0"));
      CHECK_FALSE(b->remove("rank/0"));
      CHECK(a->missing({"rank/0"}).size() == 1);

      // A key set later by another thread ends a wait.
      std::thread late([&, b = b] {
        std::this_thread::sleep_for(milliseconds(50));
        set_string(*b, "late", "x");
      });
      a->wait({"late"}, milliseconds(3000));
      late.join();

      // Time-outs name the missing keys and come on time.
      auto t0 = Clock::now();
      CHECK_THROWS_WITH(a->wait({"late", "ghost/1", "ghost/2"}, milliseconds(200)),
                        Contains("2 of 3 key(s): ghost/1, ghost/2") && Contains("200 ms"));
      auto waited = Clock::now() - t0;
      CHECK(waited >= milliseconds(200));
      CHECK(waited < milliseconds(1500));
      CHECK_THROWS_AS(b->get("ghost/3", milliseconds(50)), StoreError);
    }
  }
}

TEST_CASE("counters stay exact with several concurrent clients", "[comm]") {
  for (bool tcp : {true, false}) {
    DYNAMIC_SECTION((tcp ? "tcp" : "file")) {
      auto [a, b] = two_handles(tcp);
      std::vector<std::thread> threads;
      for (int t = 0; t < 4; ++t)
        threads.emplace_back([&, t] {
          auto& s = t % 2 ? *a : *b;
          for (int i = 0; i < 25; ++i) s.add("n", 1);
        });
      for (auto& t : threads) t.join();
      CHECK(a->add("n", 0) == 100);
    }
  }
}

TEST_CASE("a process with another job's token cannot join", "[comm]") {
  SECTION("tcp") {
    auto host = TcpStore::host({"", 0, "job-A", std::chrono::seconds(5)});
    CHECK_THROWS_WITH(TcpStore::connect({"127.0.0.1", host->port(), "job-B", std::chrono::seconds(2)}),
                      Contains("belongs to another job") && Contains(token_fingerprint("job-A")) &&
                          Contains(token_fingerprint("job-B")));
    // The store keeps serving its own job afterwards.
    auto ok = TcpStore::connect({"127.0.0.1", host->port(), "job-A", std::chrono::seconds(2)});
    set_string(*ok, "k", "v");
    CHECK(get_string(*host, "k", milliseconds(100)) == "v");
  }
  SECTION("file") {
    auto dir = temp_dir("token");
    FileStore first(dir, "job-A", milliseconds(1000));
    CHECK_THROWS_WITH(FileStore(dir, "job-B", milliseconds(1000)),
                      Contains("belongs to another job") && Contains("remove the directory"));
    CHECK_NOTHROW(FileStore(dir, "job-A", milliseconds(1000)));
  }
}

TEST_CASE("a junk client does not disturb the TCP store", "[comm]") {
  auto host = TcpStore::host({"", 0, "tok", std::chrono::seconds(5)});
  std::string error;
  auto junk = net::try_connect("127.0.0.1", host->port(), error);
  REQUIRE(junk);
  const char garbage[] = "GET / HTTP/1.0\r\n\r\n";
  CHECK(::write(junk.get(), garbage, sizeof(garbage)) > 0);
  auto client = TcpStore::connect({"127.0.0.1", host->port(), "tok", std::chrono::seconds(2)});
  CHECK(client->add("n", 3) == 3);
}

TEST_CASE("connecting to a store nobody hosts times out with a clear message", "[comm]") {
  uint16_t port;
  {
    auto probe = net::listen_on(0);  // a port that was free a moment ago, now closed
    port = net::local_port(probe.get());
  }
  auto t0 = Clock::now();
  CHECK_THROWS_WITH(TcpStore::connect({"127.0.0.1", port, "tok", milliseconds(300)}),
                    Contains("cannot reach the rendezvous store tcp://127.0.0.1:") && Contains("rank 0 hosts it"));
  CHECK(Clock::now() - t0 < milliseconds(2000));
}

TEST_CASE("open_store parses rendezvous URLs and rejects malformed ones as user errors", "[comm]") {
  for (std::string bad : {"tcp://host", "tcp://:29500", "tcp://h:0", "tcp://h:70000", "tcp://h:12x", "file://rel/path",
                          "redis://h:1", ""}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(open_store({bad, 1, "tok", milliseconds(100), "cluster.rendezvous"}), holmes::UserError);
    CHECK_THROWS_WITH(open_store({bad, 1, "tok", milliseconds(100), "cluster.rendezvous"}),
                      Contains("cluster.rendezvous") && Contains("tcp://HOST:PORT"));
  }
  auto dir = temp_dir("url");
  auto fs = open_store({"file://" + dir, 3, "tok", milliseconds(100)});
  set_string(*fs, "a", "b");
  CHECK(fs->describe() == "file://" + dir);

  uint16_t port;
  {
    auto probe = net::listen_on(0);
    port = net::local_port(probe.get());
  }
  auto url = "tcp://127.0.0.1:" + std::to_string(port);
  auto host = open_store({url, 0, "tok", milliseconds(2000)});
  auto other = open_store({url, 1, "tok", milliseconds(2000)});
  set_string(*host, "x", "y");
  CHECK(get_string(*other, "x", milliseconds(100)) == "y");
}

TEST_CASE("prefix stores keep groups apart and Gloo's adapter reads through them", "[comm]") {
  auto base = std::make_shared<FileStore>(temp_dir("prefix"), "tok", milliseconds(1000));
  auto g1 = std::make_shared<PrefixStore>(base, "pg/a/");
  auto g2 = std::make_shared<PrefixStore>(base, "pg/b/");
  set_string(*g1, "0", "one");
  CHECK(g2->missing({"0"}) == std::vector<std::string>{"0"});
  CHECK(get_string(*base, "pg/a/0", milliseconds(10)) == "one");
  GlooStoreAdapter adapter(g1, milliseconds(100));
  adapter.set("1", {'z'});
  adapter.wait({"0", "1"});
  CHECK(adapter.get("1") == std::vector<char>{'z'});
  CHECK_THROWS_WITH(adapter.wait({"2"}, milliseconds(50)), Contains("pg/a/2"));
}

TEST_CASE("store_all_gather returns values in rank order and names ranks that never publish", "[comm]") {
  auto host = TcpStore::host({"", 0, "tok", std::chrono::seconds(5)});
  std::vector<std::vector<Bytes>> got(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r)
    threads.emplace_back([&, r] {
      auto s = TcpStore::connect({"127.0.0.1", host->port(), "tok", std::chrono::seconds(5)});
      got[r] = store_all_gather(*s, "report", r, 3, Bytes(static_cast<size_t>(r + 1), static_cast<char>('a' + r)),
                                milliseconds(3000));
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < 3; ++r) CHECK(got[r] == std::vector<Bytes>{{'a'}, {'b', 'b'}, {'c', 'c', 'c'}});

  // Rank 2 published already; ranks 1 and 3 of 4 never publish "plan_hash".
  host->set("plan_hash/2", {'y'});
  CHECK_THROWS_WITH(store_all_gather(*host, "plan_hash", 0, 4, {'x'}, milliseconds(100)),
                    Contains("rank(s) [1, 3] of 4 did not publish 'plan_hash' within 100 ms"));
}

TEST_CASE("an all-gather asked to give up ends once a missing rank is known gone, not at its time-out", "[comm]") {
  auto host = TcpStore::host({"", 0, "tok", std::chrono::seconds(5)});
  host->set("files/1", {'b'});
  // Ranks 2 and 3 of 4 never publish; rank 3 is "known gone" after a few polls.
  std::vector<std::vector<int>> asked;
  int polls = 0;
  const StoreGiveUp give_up = [&](const std::vector<int>& missing) -> std::optional<std::string> {
    asked.push_back(missing);
    if (++polls < 3) return std::nullopt;
    return std::string("rank 3 is gone (its process ended)");
  };
  const auto t0 = Clock::now();
  CHECK_THROWS_AS(store_all_gather(*host, "files", 0, 4, {'a'}, milliseconds(60'000), give_up, milliseconds(20)),
                  StoreWaitAbandoned);
  CHECK(Clock::now() - t0 < std::chrono::seconds(30));  // ended by the answer, long before 60 s
  REQUIRE(asked.size() == 3);
  for (const auto& m : asked) CHECK(m == std::vector<int>{2, 3});
  polls = 0;
  CHECK_THROWS_WITH(store_all_gather(*host, "files", 0, 4, {'a'}, milliseconds(60'000), give_up, milliseconds(20)),
                    Contains("rank(s) [2, 3] of 4 did not publish 'files': rank 3 is gone (its process ended)"));

  // While nobody is known gone, the wait lasts to its time-out and says so; once everyone
  // published it returns the values without asking again.
  const StoreGiveUp never = [](const std::vector<int>&) { return std::optional<std::string>(); };
  CHECK_THROWS_WITH(store_all_gather(*host, "files", 0, 4, {'a'}, milliseconds(150), never, milliseconds(20)),
                    Contains("did not publish 'files' within 150 ms"));
  host->set("files/2", {'c'});
  host->set("files/3", {'d'});
  CHECK(store_all_gather(*host, "files", 0, 4, {'a'}, milliseconds(1000), give_up, milliseconds(20)) ==
        std::vector<Bytes>{{'a'}, {'b'}, {'c'}, {'d'}});
}

TEST_CASE("clients fail with a clear message once the hosting rank is gone", "[comm]") {
  auto host = TcpStore::host({"", 0, "tok", std::chrono::seconds(5)});
  auto client = TcpStore::connect({"127.0.0.1", host->port(), "tok", std::chrono::seconds(2)});
  set_string(*client, "k", "v");
  host.reset();  // rank 0 exits
  CHECK_THROWS_WITH(client->set("k", {'w'}), Contains("did it exit?"));
}

TEST_CASE("a TCP store marks a connection that ends without withdrawing its close request", "[comm]") {
  auto host = TcpStore::host({"", 0, "tok", std::chrono::seconds(5)});
  auto ended = TcpStore::connect({"127.0.0.1", host->port(), "tok", std::chrono::seconds(5)});
  auto left = TcpStore::connect({"127.0.0.1", host->port(), "tok", std::chrono::seconds(5)});
  CHECK(PrefixStore(ended, "pg/x/").on_close("mark", {'g', 'o', 'n', 'e'}));
  CHECK(left->on_close("left", {'g', 'o', 'n', 'e'}));
  CHECK(left->on_close("", {}));  // withdrawn: it leaves on purpose
  CHECK_FALSE(host->missing({"pg/x/mark", "left"}).empty());  // nothing while they are connected
  ended.reset();
  left.reset();
  CHECK(get_string(*host, "pg/x/mark", milliseconds(5000)) == "gone");
  // Every request the server read before the close was served: the mark comes after them.
  std::this_thread::sleep_for(milliseconds(100));
  CHECK(host->missing({"left"}) == std::vector<std::string>{"left"});
}

TEST_CASE("a file store has no connection to watch: on_close says it will not mark", "[comm]") {
  FileStore store(temp_dir("onclose"), "tok", milliseconds(5000));
  CHECK_FALSE(store.on_close("mark", {'x'}));
}
