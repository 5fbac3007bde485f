// PipeChannel: pipeline transfers beside the compute. A send does not hold up its stage, a
// receive is there when awaited, device buffers travel through pinned host memory with a
// fence before every use of the bytes, and failures reach the stage.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <vector>

#include "comm/errors.hpp"
#include "engine/parallel/pipe_channel.hpp"
#include "model/cpu/host_memory.hpp"
#include "test/support/dist_test_util.hpp"

using namespace holmes;
using namespace holmes::parallel;
using namespace holmes::test;

namespace {

// Waits up to 10 s for `flag`; false when it never came (the other rank is stuck).
bool wait_flag(const std::atomic<bool>& flag) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!flag.load()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// One end of a two-stage pipeline group: host memory or HostAsDevice, its channel.
struct Stage {
  std::unique_ptr<comm::ProcessGroup> pp;
  std::unique_ptr<device::DeviceMemory> mem;
  CommClock clock;
  std::unique_ptr<PipeChannel> ch;
};

std::unique_ptr<Stage> make_stage(comm::test::Job& job, int rank, bool device) {
  auto s = std::make_unique<Stage>();
  s->pp = job.group(job.store_for(rank), "pp", {0, 1}, rank, std::chrono::seconds(10));
  s->mem = device ? std::unique_ptr<device::DeviceMemory>(std::make_unique<HostAsDevice>())
                  : model::cpu::make_host_memory();
  s->ch = std::make_unique<PipeChannel>(*s->pp, false, *s->mem, s->clock, 4);
  return s;
}

}  // namespace

TEST_CASE("PipeChannel: a send returns before the peer receives, on host and on device memory",
          "[train][dist][pipe]") {
  for (bool device : {false, true}) {
    for (comm::test::Impl impl : {comm::test::Impl::kInProcess, comm::test::Impl::kGloo}) {
      DYNAMIC_SECTION((device ? "device memory, " : "host memory, ") << comm::test::impl_name(impl)) {
        comm::test::Job job(impl, 2);
        std::atomic<bool> posted{false};
        std::vector<float> got;
        run_threads(2, [&](int rank) {
          auto stage = make_stage(job, rank, device);
          PipeChannel& ch = *stage->ch;
          device::DeviceMemory* mem = stage->mem.get();
          CHECK(ch.mode() == (device ? PipeChannel::Mode::kStaged : PipeChannel::Mode::kHost));
          device::DeviceArray<float> buf(*mem, 6);
          if (rank == 0) {
            buf.upload(std::vector<float>{1, 2, 3, 4, 5, 6});
            const comm::P2POp send[] = {{comm::P2POp::kSend, {buf.data(), 6}, 1, 11}};
            std::shared_future<void> done = ch.post(send);
            // The peer has not posted its receive: the send is still running, the stage is not.
            if (done.valid()) CHECK(done.wait_for(std::chrono::milliseconds(20)) != std::future_status::ready);
            // Staged, the device buffer is free at once: its bytes were copied before this write.
            if (device) buf.upload(std::vector<float>{-1, -1, -1, -1, -1, -1});
            posted = true;
            ch.drain();
          } else {
            REQUIRE(wait_flag(posted));
            const comm::P2POp recv[] = {{comm::P2POp::kRecv, {buf.data(), 6}, 0, 11}};
            ch.post(recv);
            ch.await(buf.data());
            got.resize(6);
            buf.download(got);
            ch.drain();
            if (device) CHECK(static_cast<HostAsDevice&>(*mem).fences_made() >= 1);
          }
        });
        CHECK(got == std::vector<float>{1, 2, 3, 4, 5, 6});
      }
    }
  }
}

TEST_CASE("PipeChannel: a received tensor is handed on while the send of its batch still runs",
          "[train][dist][pipe]") {
  // Stage 0 posts [send activation, receive gradient] as 1F1B does; stage 1 sends the gradient
  // and receives the activation only after stage 0 has used its gradient: awaiting the
  // receive must not wait for the send (over a slow link, backward runs during it).
  for (bool device : {false, true}) {
    for (comm::test::Impl impl : {comm::test::Impl::kInProcess, comm::test::Impl::kGloo}) {
      DYNAMIC_SECTION((device ? "device memory, " : "host memory, ") << comm::test::impl_name(impl)) {
        comm::test::Job job(impl, 2);
        std::atomic<bool> used{false};
        std::vector<float> grad0(3), act1(4);
        run_threads(2, [&](int rank) {
          auto stage = make_stage(job, rank, device);
          PipeChannel& ch = *stage->ch;
          device::DeviceMemory* mem = stage->mem.get();
          if (rank == 0) {
            device::DeviceArray<float> act(*mem, 4), grad(*mem, 3);
            act.upload(std::vector<float>{1, 2, 3, 4});
            const comm::P2POp ops[] = {{comm::P2POp::kSend, {act.data(), 4}, 1, 1},
                                       {comm::P2POp::kRecv, {grad.data(), 3}, 1, 2}};
            ch.post(ops);
            ch.await(grad.data());
            grad.download(grad0);
            used = true;
            ch.drain();
          } else {
            device::DeviceArray<float> act(*mem, 4), grad(*mem, 3);
            grad.upload(std::vector<float>{7, 8, 9});
            const comm::P2POp send[] = {{comm::P2POp::kSend, {grad.data(), 3}, 0, 2}};
            ch.post(send);
            CHECK(wait_flag(used));
            const comm::P2POp recv[] = {{comm::P2POp::kRecv, {act.data(), 4}, 0, 1}};
            ch.post(recv);
            ch.await(act.data());
            act.download(act1);
            ch.drain();
          }
        });
        CHECK(grad0 == std::vector<float>{7, 8, 9});
        CHECK(act1 == std::vector<float>{1, 2, 3, 4});
      }
    }
  }
}

TEST_CASE("PipeChannel: paired sends and receives in schedule order, pinned buffers bounded",
          "[train][dist][pipe]") {
  // Two stages trade 12 paired messages (as 1F1B's [send activation, receive gradient]); the
  // staged side may hold at most 3 pinned buffers, so posts wait for old transfers to end.
  const int rounds = 12;
  comm::test::Job job(comm::test::Impl::kInProcess, 2);
  std::vector<size_t> pinned(2);
  run_threads(2, [&](int rank) {
    auto pp = job.group(nullptr, "pp", {0, 1}, rank, std::chrono::seconds(10));
    HostAsDevice mem;
    CommClock clock;
    PipeChannel ch(*pp, false, mem, clock, 3);
    for (int i = 0; i < rounds; ++i) {
      device::DeviceArray<float> out(mem, 4), in(mem, 4);
      out.upload(std::vector<float>{float(i), float(rank), float(i * rank), 7});
      const comm::P2POp ops[] = {{comm::P2POp::kSend, {out.data(), 4}, 1 - rank, uint32_t(i)},
                                 {comm::P2POp::kRecv, {in.data(), 4}, 1 - rank, uint32_t(i)}};
      ch.post(ops);
      ch.await(in.data());
      std::vector<float> got(4);
      in.download(got);
      CHECK(got == std::vector<float>{float(i), float(1 - rank), float(i * (1 - rank)), 7});
    }
    ch.drain();
    pinned[rank] = ch.pinned_buffers();
  });
  CHECK(pinned[0] <= 3);
  CHECK(pinned[1] <= 3);
}

TEST_CASE("PipeChannel: a peer that never receives fails the await, naming it", "[train][dist][pipe]") {
  comm::test::Job job(comm::test::Impl::kInProcess, 2);
  std::string seen;
  run_threads(2, [&](int rank) {
    auto pp = job.group(nullptr, "pp", {0, 1}, rank, std::chrono::milliseconds(300));
    if (rank == 1) return;  // never posts its half
    auto mem = model::cpu::make_host_memory();
    CommClock clock;
    PipeChannel ch(*pp, false, *mem, clock, 4);
    std::vector<float> in(3);
    const comm::P2POp recv[] = {{comm::P2POp::kRecv, in, 1, 5}};
    ch.post(recv);
    try {
      ch.await(in.data());
    } catch (const comm::CommError& e) {
      seen = e.what();
    }
    ch.abandon();
  });
  CHECK_THAT(seen, Catch::Matchers::Contains("peer 1"));
}

TEST_CASE("PipeChannel: a device group is called at once and orders the transfers itself", "[train][dist][pipe]") {
  comm::test::Job job(comm::test::Impl::kInProcess, 2);
  run_threads(2, [&](int rank) {
    auto pp = job.group(nullptr, "pp", {0, 1}, rank, std::chrono::seconds(10));
    HostAsDevice mem;
    CommClock clock;
    PipeChannel ch(*pp, true, mem, clock, 4);
    CHECK(ch.mode() == PipeChannel::Mode::kDeviceGroup);
    device::DeviceArray<float> out(mem, 2), in(mem, 2);
    out.upload(std::vector<float>{float(rank), 3});
    const comm::P2POp ops[] = {{comm::P2POp::kSend, {out.data(), 2}, 1 - rank, 1},
                               {comm::P2POp::kRecv, {in.data(), 2}, 1 - rank, 1}};
    CHECK_FALSE(ch.post(ops).valid());  // enqueued: the send buffer is free for later queued work
    ch.await(in.data());
    std::vector<float> got(2);
    in.download(got);
    CHECK(got == std::vector<float>{float(1 - rank), 3});
    CHECK(ch.pinned_buffers() == 0);
    ch.drain();
  });
}
