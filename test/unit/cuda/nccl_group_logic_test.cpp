// The NCCL group's own logic over a driver of fakes (comm/nccl/nccl_driver.hpp), so it runs
// without a GPU: the unique id through the store, non-blocking init polled until ready, the
// time-out and abort when a member never joins, what each operation hands NCCL, the watchdog
// aborting an operation that does not complete or a communicator with an asynchronous error,
// and the close. The real NCCL runs in nccl_group_test.cpp where a GPU exists.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "comm/errors.hpp"
#include "comm/nccl/nccl_driver.hpp"
#include "comm/tcp_store.hpp"

namespace hc = holmes::comm;
using namespace std::chrono_literals;

namespace {

// What the fakes answer and what they were asked. One test at a time uses it.
struct Fake {
  std::mutex mu;
  std::vector<std::string> calls;
  std::atomic<int> polls_in_progress{0};  // async-error polls answering ncclInProgress first
  std::atomic<bool> never_ready{false};   // init stays in progress
  ncclResult_t init_result = ncclInProgress;
  ncclResult_t op_result = ncclSuccess;   // what each operation call returns
  std::atomic<ncclResult_t> async{ncclSuccess};
  std::atomic<bool> events_complete{true};
  std::atomic<int> complete_upto{-1};      // >= 0: events with id <= this complete, the rest not
  std::atomic<ncclResult_t> query_result{ncclSuccess};  // what the async-error query itself returns
  std::atomic<int> aborts{0}, finalizes{0}, destroys{0}, events_made{0}, events_freed{0}, frees{0};
  std::vector<std::string> ids;  // unique ids handed to init, by call
  // send / recv: the buffer and element type of each call, in order.
  std::vector<std::pair<const void*, ncclDataType_t>> p2p;

  void log(std::string s) {
    std::lock_guard<std::mutex> lock(mu);
    calls.push_back(std::move(s));
  }
  // The calls so far (watchdog threads may be logging meanwhile).
  std::vector<std::string> seen() {
    std::lock_guard<std::mutex> lock(mu);
    return calls;
  }
  void forget() {
    std::lock_guard<std::mutex> lock(mu);
    calls.clear();
  }
};

Fake* fake = nullptr;
float scratch_memory[1];

std::string ptr_text(const void* p) { return std::to_string(reinterpret_cast<uintptr_t>(p)); }
const char* op_text(ncclRedOp_t op) { return op == ncclSum ? "sum" : op == ncclMax ? "max" : "?"; }

hc::NcclApi fake_api() {
  hc::NcclApi a{};
  a.get_version = [](int* v) { *v = 22809; return ncclSuccess; };
  a.get_unique_id = [](ncclUniqueId* id) {
    std::memset(id->internal, 0, sizeof(id->internal));
    std::strcpy(id->internal, "fake-unique-id-42");
    return ncclSuccess;
  };
  a.comm_init_rank_config = [](ncclComm_t* comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t* c) {
    fake->log("init rank=" + std::to_string(rank) + " nranks=" + std::to_string(nranks) +
              " blocking=" + std::to_string(c->blocking) + " net=" + (c->netName ? c->netName : "(unset)") +
              " name=" + c->commName);
    {
      std::lock_guard<std::mutex> lock(fake->mu);
      fake->ids.emplace_back(id.internal);
    }
    *comm = reinterpret_cast<ncclComm_t>(static_cast<uintptr_t>(0x1000 + rank));
    return fake->init_result;
  };
  a.comm_get_async_error = [](ncclComm_t, ncclResult_t* state) {
    if (fake->never_ready || fake->polls_in_progress.fetch_sub(1) > 0) *state = ncclInProgress;
    else *state = fake->async.load();
    return fake->query_result.load();
  };
  a.comm_finalize = [](ncclComm_t) { ++fake->finalizes; return ncclSuccess; };
  a.comm_destroy = [](ncclComm_t) { ++fake->destroys; return ncclSuccess; };
  a.comm_abort = [](ncclComm_t) { ++fake->aborts; return ncclSuccess; };
  a.get_error_string = [](ncclResult_t r) { return r == ncclRemoteError ? "fake: remote process exited" : "fake: error"; };
  a.get_last_error = [](ncclComm_t) { return "fake last words"; };
  a.all_reduce = [](const void* s, void* r, size_t n, ncclDataType_t, ncclRedOp_t op, ncclComm_t, cudaStream_t st) {
    fake->log("all_reduce n=" + std::to_string(n) + " op=" + op_text(op) + " in_place=" + (s == r ? "1" : "0") +
              " stream=" + ptr_text(st));
    return fake->op_result;
  };
  a.reduce_scatter = [](const void*, void*, size_t n, ncclDataType_t, ncclRedOp_t op, ncclComm_t, cudaStream_t) {
    fake->log("reduce_scatter recvcount=" + std::to_string(n) + " op=" + op_text(op));
    return fake->op_result;
  };
  a.all_gather = [](const void*, void*, size_t n, ncclDataType_t, ncclComm_t, cudaStream_t) {
    fake->log("all_gather sendcount=" + std::to_string(n));
    return fake->op_result;
  };
  a.broadcast = [](const void*, void*, size_t n, ncclDataType_t, int root, ncclComm_t, cudaStream_t) {
    fake->log("broadcast n=" + std::to_string(n) + " root=" + std::to_string(root));
    return fake->op_result;
  };
  a.send = [](const void* buf, size_t n, ncclDataType_t t, int peer, ncclComm_t, cudaStream_t) {
    fake->p2p.emplace_back(buf, t);
    fake->log("send n=" + std::to_string(n) + " peer=" + std::to_string(peer));
    return ncclSuccess;
  };
  a.recv = [](void* buf, size_t n, ncclDataType_t t, int peer, ncclComm_t, cudaStream_t) {
    fake->p2p.emplace_back(buf, t);
    fake->log("recv n=" + std::to_string(n) + " peer=" + std::to_string(peer));
    return ncclSuccess;
  };
  a.group_start = [] { fake->log("group_start"); return ncclSuccess; };
  a.group_end = [] { fake->log("group_end"); return fake->op_result; };
  return a;
}

hc::NcclDriver fake_driver() {
  static const hc::NcclApi api = fake_api();
  hc::NcclDriver d;
  d.nccl = &api;
  d.cuda.event_create = [](cudaEvent_t* e, unsigned) {
    *e = reinterpret_cast<cudaEvent_t>(static_cast<uintptr_t>(++fake->events_made));
    return cudaSuccess;
  };
  d.cuda.event_record = [](cudaEvent_t, cudaStream_t) { return cudaSuccess; };
  d.cuda.event_query = [](cudaEvent_t e) {
    const int upto = fake->complete_upto;
    if (upto >= 0) return static_cast<int>(reinterpret_cast<uintptr_t>(e)) <= upto ? cudaSuccess : cudaErrorNotReady;
    return fake->events_complete ? cudaSuccess : cudaErrorNotReady;
  };
  d.cuda.event_destroy = [](cudaEvent_t) { ++fake->events_freed; return cudaSuccess; };
  d.cuda.device_malloc = [](void** p, size_t) { *p = scratch_memory; return cudaSuccess; };
  d.cuda.device_free = [](void*) { ++fake->frees; return cudaSuccess; };
  d.cuda.error_string = [](cudaError_t) { return "fake cuda error"; };
  d.cuda.get_device = [](int* device) { *device = 3; return cudaSuccess; };
  d.cuda.set_device = [](int device) { fake->log("watchdog on device " + std::to_string(device)); return cudaSuccess; };
  d.cuda.stream_create = [](cudaStream_t* s, unsigned) {
    *s = reinterpret_cast<cudaStream_t>(static_cast<uintptr_t>(0x5eed));
    return cudaSuccess;
  };
  d.cuda.stream_destroy = [](cudaStream_t) { fake->log("own stream destroyed"); return cudaSuccess; };
  return d;
}

// A fresh Fake for one test case.
struct FakeScope {
  Fake state;
  FakeScope() { fake = &state; }
  ~FakeScope() { fake = nullptr; }
};

std::shared_ptr<hc::TcpStore> host_store() { return hc::TcpStore::host({"", 0, "logic", 10s}); }

// Member 0 of a group of `size` over the fakes (their init never waits for the others).
std::unique_ptr<hc::ProcessGroup> fake_group(const std::string& name, int size, const char* net,
                                             std::chrono::milliseconds timeout) {
  std::vector<int> members(size);
  for (int r = 0; r < size; ++r) members[r] = r;
  return hc::make_nccl_group(host_store(), hc::GroupSpec{name, members, 0, timeout}, net, fake_driver());
}

bool contains(const std::vector<std::string>& calls, const std::string& what) {
  return std::find(calls.begin(), calls.end(), what) != calls.end();
}

}  // namespace

TEST_CASE("NCCL group: the unique id travels through the store, init is non-blocking and polled until ready",
          "[nccl_logic]") {
  FakeScope scope;
  fake->polls_in_progress = 3;
  auto host = host_store();
  std::unique_ptr<hc::ProcessGroup> groups[2];
  std::thread other([&] {
    auto store = hc::TcpStore::connect({"127.0.0.1", host->port(), "logic", 10s});
    groups[1] = hc::make_nccl_group(store, hc::GroupSpec{"dp0", {5, 2}, 2, 5s}, "IB", fake_driver());
  });
  groups[0] = hc::make_nccl_group(host, hc::GroupSpec{"dp0", {5, 2}, 5, 5s}, "IB", fake_driver());
  other.join();
  CHECK(groups[0]->transport() == "nccl IB");
  CHECK(contains(fake->seen(), "init rank=0 nranks=2 blocking=0 net=IB name=dp0"));
  CHECK(contains(fake->seen(), "init rank=1 nranks=2 blocking=0 net=IB name=dp0"));
  REQUIRE(fake->ids.size() == 2);
  CHECK(fake->ids[0] == "fake-unique-id-42");  // rank 1 got rank 0's id through the store
  CHECK(fake->ids[1] == "fake-unique-id-42");
  CHECK(fake->polls_in_progress <= 0);  // it waited through the in-progress answers
  // Each watchdog works on the device that was current when its group was made.
  auto watchdogs = [] {
    auto calls = fake->seen();
    return std::count(calls.begin(), calls.end(), "watchdog on device 3");
  };
  for (int i = 0; i < 200 && watchdogs() < 2; ++i) std::this_thread::sleep_for(5ms);
  CHECK(watchdogs() == 2);
  groups[0].reset();
  groups[1].reset();
  CHECK(fake->finalizes == 2);
  CHECK(fake->destroys == 2);
  CHECK(fake->aborts == 0);
  CHECK(fake->frees == 2);
}

TEST_CASE("NCCL group: a member that never joins ends the init at the time-out, aborted and named", "[nccl_logic]") {
  FakeScope scope;
  fake->never_ready = true;
  auto store = host_store();
  const auto t0 = std::chrono::steady_clock::now();
  try {
    hc::make_nccl_group(store, hc::GroupSpec{"pp3", {3, 8}, 3, 300ms}, "Socket", fake_driver());
    FAIL("created without its second member");
  } catch (const hc::CommError& e) {
    INFO(e.what());
    CHECK(e.where().op == "connect");
    CHECK(e.where().group == "pp3");
    CHECK(e.where().peer == 1);
    CHECK(e.where().peer_global == 8);
    CHECK(std::string(e.what()).find("not connected within 300 ms; member(s) [1] never joined (net Socket)") !=
          std::string::npos);
  }
  const auto took = std::chrono::steady_clock::now() - t0;
  CHECK(took >= 300ms);
  CHECK(took < 3s);
  CHECK(fake->aborts == 1);
}

TEST_CASE("NCCL group: an init error is a CommError with NCCL's words, and the communicator is aborted",
          "[nccl_logic]") {
  FakeScope scope;
  fake->init_result = ncclSystemError;
  auto store = host_store();
  try {
    hc::make_nccl_group(store, hc::GroupSpec{"world0", {0}, 0, 1s}, "Socket", fake_driver());
    FAIL("created although init failed");
  } catch (const hc::CommError& e) {
    CHECK(std::string(e.what()).find("ncclCommInitRankConfig failed: fake: error (fake last words) (net Socket; "
                                     "every member joined)") != std::string::npos);
  }
  CHECK(fake->aborts == 1);
}

TEST_CASE("NCCL group: each operation reaches NCCL with its counts, op and stream, send_recv in one group call",
          "[nccl_logic]") {
  FakeScope scope;
  auto g = fake_group("tp0", 2, "IB", 2s);
  std::vector<float> a(6), b(3);  // stand-ins for device buffers: the fakes never touch them
  hc::OpOptions o;
  o.stream = reinterpret_cast<void*>(static_cast<uintptr_t>(0xbeef));
  fake->forget();
  g->all_reduce({a.data(), 5}, hc::ReduceOp::kMax, o);
  g->reduce_scatter({b.data(), 3}, {a.data(), 6}, hc::ReduceOp::kSum, o);
  g->all_gather({a.data(), 6}, {b.data(), 3}, o);
  g->broadcast({a.data(), 6}, 1, o);
  hc::P2POp ops[2] = {{hc::P2POp::kSend, {b.data(), 3}, 1, 7}, {hc::P2POp::kRecv, {a.data(), 2}, 1, 8}};
  g->send_recv(ops, o);
  g->barrier(o);
  const std::vector<std::string> want = {"all_reduce n=5 op=max in_place=1 stream=48879",
                                         "reduce_scatter recvcount=3 op=sum",
                                         "all_gather sendcount=3",
                                         "broadcast n=6 root=1",
                                         "group_start",
                                         "send n=3 peer=1",
                                         "recv n=2 peer=1",
                                         "group_end",
                                         "all_reduce n=1 op=sum in_place=1 stream=48879"};
  std::vector<std::string> calls;
  for (const auto& c : fake->seen())
    if (c.rfind("watchdog", 0) != 0) calls.push_back(c);  // the watchdog's start may come any time
  CHECK(calls == want);
  CHECK_THROWS_AS(g->reduce_scatter({b.data(), 2}, {a.data(), 6}, hc::ReduceOp::kSum, o), std::invalid_argument);
  CHECK_THROWS_AS(g->send({b.data(), 3}, 0, 1, o), std::invalid_argument);  // itself
  g.reset();
  CHECK(fake->events_made == 6);  // one completion event per operation ...
  CHECK(fake->events_freed == 6);  // ... each released once complete
  CHECK(fake->aborts == 0);
}

TEST_CASE("NCCL group: all_to_all_v is one group call of a send and a receive per member with a count",
          "[nccl_logic]") {
  FakeScope scope;
  auto g = fake_group("ep0", 3, "IB", 2s);
  std::vector<uint16_t> in(6), out(5);  // bf16 stand-ins for device buffers
  const std::vector<size_t> in_counts = {2, 0, 4}, out_counts = {1, 4, 0};
  fake->forget();
  g->all_to_all_v(out.data(), out_counts, in.data(), in_counts, hc::DType::kBf16, {});
  const std::vector<std::string> want = {"group_start", "send n=2 peer=0", "recv n=1 peer=0", "recv n=4 peer=1",
                                         "send n=4 peer=2", "group_end"};
  std::vector<std::string> calls;
  for (const auto& c : fake->seen())
    if (c.rfind("watchdog", 0) != 0) calls.push_back(c);
  CHECK(calls == want);
  // Each half at its block's offset, as bf16.
  const std::vector<std::pair<const void*, ncclDataType_t>> where = {
      {in.data(), ncclBfloat16}, {out.data(), ncclBfloat16}, {out.data() + 1, ncclBfloat16},
      {in.data() + 2, ncclBfloat16}};
  CHECK(fake->p2p == where);
  // all_to_all: equal fp32 blocks, this member's own included.
  std::vector<float> a(6), b(6);
  fake->p2p.clear();
  g->all_to_all(b, a);
  REQUIRE(fake->p2p.size() == 6);
  for (int q = 0; q < 3; ++q) {
    CHECK(fake->p2p[2 * q] == std::pair<const void*, ncclDataType_t>{a.data() + 2 * q, ncclFloat32});
    CHECK(fake->p2p[2 * q + 1] == std::pair<const void*, ncclDataType_t>{b.data() + 2 * q, ncclFloat32});
  }
  CHECK_THROWS_AS(g->all_to_all_v(out.data(), std::vector<size_t>{1, 4}, in.data(), in_counts, hc::DType::kF32, {}),
                  std::invalid_argument);
}

TEST_CASE("NCCL group: an operation answered in-progress is polled until enqueued", "[nccl_logic]") {
  FakeScope scope;
  auto g = fake_group("emb0", 2, "Socket", 2s);
  std::vector<float> a(4);
  fake->op_result = ncclInProgress;
  fake->polls_in_progress = 2;
  g->all_reduce(a, hc::ReduceOp::kSum);
  CHECK(fake->polls_in_progress <= 0);
  fake->op_result = ncclSuccess;
  g->barrier();
  CHECK(fake->aborts == 0);
}

TEST_CASE("NCCL group: an operation unfinished at its time-out aborts the communicator, the group stays broken",
          "[nccl_logic]") {
  FakeScope scope;
  auto g = fake_group("dp1", 2, "IB", 5s);
  std::vector<float> a(4);
  fake->events_complete = false;  // the GPU never finishes: a peer is dead or stuck
  hc::OpOptions quick;
  quick.timeout = 200ms;
  const auto t0 = std::chrono::steady_clock::now();
  g->all_reduce(a, hc::ReduceOp::kSum, quick);  // returns once enqueued
  CHECK(std::chrono::steady_clock::now() - t0 < 150ms);
  try {
    g->barrier(quick);
    FAIL("barrier returned although nothing completed");
  } catch (const hc::CommError& e) {
    INFO(e.what());
    CHECK(e.where().op == "barrier");
    CHECK(std::string(e.what()).find("all_reduce #0 did not complete within 200 ms") != std::string::npos);
  }
  CHECK(std::chrono::steady_clock::now() - t0 < 2s);
  CHECK(fake->aborts == 1);
  CHECK_THROWS_WITH(g->all_reduce(a, hc::ReduceOp::kSum), Catch::Contains("group is broken by an earlier failure"));
  g.reset();
  CHECK(fake->finalizes == 0);  // an aborted communicator is not finalized
  CHECK(fake->aborts == 1);
}

TEST_CASE("NCCL group: an asynchronous error aborts the communicator and the next call reports it", "[nccl_logic]") {
  FakeScope scope;
  auto g = fake_group("world0", 3, "Socket", 5s);
  std::vector<float> a(4);
  g->all_reduce(a, hc::ReduceOp::kSum);
  fake->async = ncclRemoteError;
  for (int i = 0; i < 200 && fake->aborts == 0; ++i) std::this_thread::sleep_for(5ms);
  CHECK(fake->aborts == 1);
  try {
    g->all_reduce(a, hc::ReduceOp::kSum);
    FAIL("the call went through a broken group");
  } catch (const hc::CommError& e) {
    CHECK(e.where().peer == -1);  // NCCL does not say who; the job's blame protocol does
    CHECK(std::string(e.what()).find("asynchronous NCCL error: fake: remote process exited") != std::string::npos);
  }
}

TEST_CASE("NCCL group: polls spin before they sleep, then back off to 10 ms", "[nccl_logic]") {
  for (int a = 0; a < hc::kSpinPolls; ++a) CHECK(hc::poll_pause(a).count() == 0);
  CHECK(hc::poll_pause(hc::kSpinPolls).count() == 10);
  CHECK(hc::poll_pause(hc::kSpinPolls + 1).count() == 20);
  CHECK(hc::poll_pause(hc::kSpinPolls + 100).count() == 10'000);
  for (int a = 1; a < 200; ++a) CHECK(hc::poll_pause(a) >= hc::poll_pause(a - 1));
}

TEST_CASE("NCCL group: a node-local group names no network, barrier without a stream uses the group's own",
          "[nccl_logic]") {
  FakeScope scope;
  auto g = fake_group("tp1", 2, "", 2s);
  CHECK(contains(fake->seen(), "init rank=0 nranks=2 blocking=0 net=(unset) name=tp1"));
  CHECK(g->transport() == "nccl (node-local)");
  fake->forget();
  g->barrier();
  CHECK(contains(fake->seen(), "all_reduce n=1 op=sum in_place=1 stream=" + std::to_string(0x5eed)));
  g.reset();
  CHECK(contains(fake->seen(), "own stream destroyed"));
  CHECK_THROWS_AS(fake_group("tp1", 2, "RoCE", 2s), std::invalid_argument);
}

TEST_CASE("NCCL group: an operation's time-out runs from when the one before it completed", "[nccl_logic]") {
  // The host enqueues two operations at once (it runs ahead of the GPU); the first completes
  // after 2 s, the second 1.5 s later. Counted from its enqueue the second would have timed
  // out at 3 s; counted from the first's completion it has until 5 s.
  FakeScope scope;
  auto g = fake_group("pp0", 2, "Socket", 3s);
  std::vector<float> a(4);
  const int first = fake->events_made + 1;
  fake->complete_upto = first - 1;  // neither completes yet
  const auto t0 = std::chrono::steady_clock::now();
  g->all_reduce(a, hc::ReduceOp::kSum);
  g->all_reduce(a, hc::ReduceOp::kSum);
  std::this_thread::sleep_until(t0 + 2s);
  fake->complete_upto = first;  // the first completes
  std::this_thread::sleep_until(t0 + 3500ms);
  CHECK(fake->aborts == 0);  // past 3 s after the second's enqueue, within 3 s of the first's completion
  fake->complete_upto = -1;  // the second, and the barrier's, complete
  g->barrier();  // everything completed: no failure to report
  CHECK(fake->aborts == 0);
}

TEST_CASE("NCCL group: abort() stops the communicator at once and the group stays broken", "[nccl_logic]") {
  FakeScope scope;
  auto g = fake_group("dp2", 2, "IB", 5s);
  std::vector<float> a(4);
  fake->events_complete = false;  // a peer died: the operation spins
  g->all_reduce(a, hc::ReduceOp::kSum);
  g->abort();  // what a rank does when its step failed elsewhere, before freeing device memory
  CHECK(fake->aborts == 1);
  CHECK_THROWS_WITH(g->all_reduce(a, hc::ReduceOp::kSum), Catch::Contains("aborted by this rank"));
  g.reset();
  CHECK(fake->aborts == 1);
}

TEST_CASE("NCCL group: a failing query of the communicator's state aborts it", "[nccl_logic]") {
  FakeScope scope;
  auto g = fake_group("world1", 2, "Socket", 5s);
  fake->query_result = ncclInvalidArgument;
  for (int i = 0; i < 400 && fake->aborts == 0; ++i) std::this_thread::sleep_for(5ms);
  CHECK(fake->aborts == 1);
  std::vector<float> a(4);
  CHECK_THROWS_WITH(g->all_reduce(a, hc::ReduceOp::kSum), Catch::Contains("cannot ask NCCL for the communicator"));
}
