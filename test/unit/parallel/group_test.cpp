// parallel::Group in its three ways (group.hpp): host memory (the CPU), device memory staged
// through pinned host memory (HostAsDevice: a missing fence throws), and device groups (as
// NCCL: device buffers only, on the compute and side queues). Collectives give the right
// numbers, bf16 sums round once, transfers run beside the compute and fail naming the peer,
// pinned memory stays bounded.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <vector>

#include "comm/errors.hpp"
#include "engine/parallel/group.hpp"
#include "model/bf16.hpp"
#include "model/cpu/host_memory.hpp"
#include "test/support/dist_test_util.hpp"

using namespace holmes;
using namespace holmes::parallel;
using namespace holmes::test;

namespace {

enum class Way { kHost, kStaged, kDevice };
const char* name_of(Way w) { return w == Way::kHost ? "host" : w == Way::kStaged ? "staged" : "device group"; }

// Waits up to 10 s for `flag`; false when it never came (the other rank is stuck).
bool wait_flag(const std::atomic<bool>& flag) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!flag.load()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// One member of an n-member group made `way`, with its memory and clock.
struct Member {
  std::unique_ptr<comm::ProcessGroup> host, device;
  std::unique_ptr<device::DeviceMemory> mem;
  CommClock clock;
  std::unique_ptr<Group> group;
};

std::unique_ptr<Member> member(comm::test::Job& job, int rank, int n, Way way, Group::Options o = {},
                               std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  auto m = std::make_unique<Member>();
  std::vector<int> all(n);
  for (int i = 0; i < n; ++i) all[i] = i;
  auto store = job.impl() == comm::test::Impl::kGloo ? job.store_for(rank) : nullptr;
  m->host = job.group(store, "g", all, rank, timeout);
  if (way == Way::kHost) {
    m->mem = model::cpu::make_host_memory();
  } else {
    m->mem = std::make_unique<HostAsDevice>();
    m->host = std::make_unique<HostOnlyGroup>(std::move(m->host), *m->mem);  // device bytes must be staged
  }
  if (way == Way::kDevice)
    m->device = std::make_unique<DeviceOnlyGroup>(job.group(store, "dev", all, rank, timeout), *m->mem);
  m->group = std::make_unique<Group>(*m->host, m->device.get(), *m->mem, m->clock, o);
  return m;
}

std::vector<float> read(device::DeviceArray<float>& a) {
  std::vector<float> out(a.size());
  a.download(out);
  return out;
}

}  // namespace

TEST_CASE("Group: all_reduce, reduce_scatter and all_gather give the sums every way", "[parallel][group]") {
  for (Way way : {Way::kHost, Way::kStaged, Way::kDevice}) {
    DYNAMIC_SECTION(name_of(way)) {
      comm::test::Job job(comm::test::Impl::kInProcess, 3);
      run_threads(3, [&](int rank) {
        auto m = member(job, rank, 3, way);
        Group& g = *m->group;
        CHECK(g.size() == 3);
        CHECK(g.rank() == rank);
        CHECK(g.mode() == (way == Way::kHost ? Group::Mode::kHost
                           : way == Way::kStaged ? Group::Mode::kStaged
                                                 : Group::Mode::kDevice));
        // In the compute order, on the backend's memory.
        device::DeviceArray<float> x(*m->mem, 4);
        x.upload(std::vector<float>{1.f + rank, 2, 3, float(rank)});
        g.all_reduce(Buf::f32(x.data(), 4), comm::ReduceOp::kSum);
        CHECK(read(x) == std::vector<float>{6, 6, 9, 3});
        g.all_reduce(Buf::f32(x.data(), 4), comm::ReduceOp::kMax);
        CHECK(read(x) == std::vector<float>{6, 6, 9, 3});
        // Host buffers (the trainer's sums) go to the host group whatever the way.
        std::vector<float> host = {float(rank), 1};
        g.all_reduce(Buf::f32(host.data(), 2), comm::ReduceOp::kSum);
        CHECK(host == std::vector<float>{3, 3});
        // Beside the compute: 7 elements into chunks of 3 (zero-padded to 9).
        device::DeviceArray<float> in(*m->mem, 7), out(*m->mem, 3);
        in.upload(std::vector<float>{1, 2, 3, 4, 5, 6, 7});
        Work rs = g.reduce_scatter(Buf::f32(out.data(), 3), Buf::f32(in.data(), 7), comm::ReduceOp::kSum);
        rs.land();
        const std::vector<std::vector<float>> want = {{3, 6, 9}, {12, 15, 18}, {21, 0, 0}};
        CHECK(read(out) == want[rank]);
        // Each member gives its part (the last a short one), everyone gets the 7.
        device::DeviceArray<float> mine(*m->mem, 3), whole(*m->mem, 7);
        const size_t n = rank == 2 ? 1 : 3;
        mine.upload(std::vector<float>{10.f * rank + 1, 10.f * rank + 2, 10.f * rank + 3});
        Work ag = g.all_gather(Buf::f32(whole.data(), 7), Buf::f32(mine.data(), n));
        ag.land();
        CHECK(read(whole) == std::vector<float>{1, 2, 3, 11, 12, 13, 21});
        // An all-reduce beside the compute (the tied embedding's sum): the same bits as in the
        // compute order, on values whose sum rounds.
        std::vector<float> vals(5);
        for (size_t i = 0; i < vals.size(); ++i) vals[i] = 0.1f * float(i + 1) / float(rank + 3) + 1e-7f * float(rank);
        device::DeviceArray<float> a(*m->mem, 5), b(*m->mem, 5);
        a.upload(vals);
        b.upload(vals);
        Work ar = g.all_reduce_beside(Buf::f32(a.data(), 5), comm::ReduceOp::kSum);
        g.all_reduce(Buf::f32(b.data(), 5), comm::ReduceOp::kSum);
        ar.land();
        CHECK(read(a) == read(b));
        CHECK(read(a) != vals);
        g.drain();
      });
    }
  }
}

TEST_CASE("Group: bf16 sums are widened, summed in fp32 and rounded once", "[parallel][group]") {
  // Three values whose bf16 sum rounds differently when rounded after each addition.
  const float a = 1.0f, b = 0.00390625f, c = 0.00390625f;  // 1 + 2^-8 + 2^-8 = 1 + 2^-7
  for (Way way : {Way::kHost, Way::kStaged, Way::kDevice}) {
    DYNAMIC_SECTION(name_of(way)) {
      comm::test::Job job(comm::test::Impl::kInProcess, 3);
      run_threads(3, [&](int rank) {
        auto m = member(job, rank, 3, way);
        device::DeviceArray<model::bf16> x(*m->mem, 1);
        const float mine = rank == 0 ? a : rank == 1 ? b : c;
        x.upload(std::vector<model::bf16>{model::float_to_bf16(mine)});
        m->group->all_reduce(Buf{x.data(), 1, comm::DType::kBf16}, comm::ReduceOp::kSum);
        std::vector<model::bf16> got(1);
        x.download(got);
        CHECK(model::bf16_to_float(got[0]) == 1.0078125f);  // exact 1 + 2^-7; two roundings would give 1
      });
    }
  }
}

TEST_CASE("Group: a send returns before the peer receives, and frees its buffer when the way allows",
          "[parallel][group]") {
  for (Way way : {Way::kHost, Way::kStaged}) {
    for (comm::test::Impl impl : {comm::test::Impl::kInProcess, comm::test::Impl::kGloo}) {
      DYNAMIC_SECTION(name_of(way) << ", " << comm::test::impl_name(impl)) {
        comm::test::Job job(impl, 2);
        std::atomic<bool> posted{false};
        std::vector<float> got;
        run_threads(2, [&](int rank) {
          auto m = member(job, rank, 2, way);
          device::DeviceArray<float> buf(*m->mem, 6);
          if (rank == 0) {
            buf.upload(std::vector<float>{1, 2, 3, 4, 5, 6});
            const Transfer send[] = {{Transfer::kSend, Buf::f32(buf.data(), 6), 1, 11}};
            Work w = m->group->send_recv(send);
            const std::shared_future<void> free = w.inputs_free();
            // The peer has not posted its receive: the send still runs, the caller does not.
            if (way == Way::kHost) {
              REQUIRE(free.valid());
              CHECK(free.wait_for(std::chrono::milliseconds(20)) != std::future_status::ready);
            } else {
              CHECK_FALSE(free.valid());  // staged: the bytes were copied out by a queued copy
              buf.upload(std::vector<float>{-1, -1, -1, -1, -1, -1});
            }
            posted = true;
            m->group->drain();
          } else {
            REQUIRE(wait_flag(posted));
            const Transfer recv[] = {{Transfer::kRecv, Buf::f32(buf.data(), 6), 0, 11}};
            Work w = m->group->send_recv(recv);
            w.land();
            got = read(buf);
            m->group->drain();
          }
        });
        CHECK(got == std::vector<float>{1, 2, 3, 4, 5, 6});
      }
    }
  }
}

TEST_CASE("Group: a received tensor lands while the send of its batch still runs", "[parallel][group]") {
  // Rank 0 posts [send activation, receive gradient] as 1F1B does; rank 1 sends the gradient
  // and receives the activation only after rank 0 has used its gradient: landing the receive
  // must not wait for the send (over a slow link, backward runs during it).
  for (Way way : {Way::kHost, Way::kStaged}) {
    for (comm::test::Impl impl : {comm::test::Impl::kInProcess, comm::test::Impl::kGloo}) {
      DYNAMIC_SECTION(name_of(way) << ", " << comm::test::impl_name(impl)) {
        comm::test::Job job(impl, 2);
        std::atomic<bool> used{false};
        std::vector<float> grad0, act1;
        run_threads(2, [&](int rank) {
          auto m = member(job, rank, 2, way);
          device::DeviceArray<float> act(*m->mem, 4), grad(*m->mem, 2);
          if (rank == 0) {
            act.upload(std::vector<float>{1, 2, 3, 4});
            const Transfer ops[] = {{Transfer::kSend, Buf::f32(act.data(), 4), 1, 1},
                                    {Transfer::kRecv, Buf::f32(grad.data(), 2), 1, 2}};
            Work w = m->group->send_recv(ops);
            w.land();
            grad0 = read(grad);
            used = true;
            m->group->drain();
          } else {
            grad.upload(std::vector<float>{7, 8});
            const Transfer send[] = {{Transfer::kSend, Buf::f32(grad.data(), 2), 0, 2}};
            m->group->send_recv(send);
            CHECK(wait_flag(used));
            const Transfer recv[] = {{Transfer::kRecv, Buf::f32(act.data(), 4), 0, 1}};
            m->group->send_recv(recv).land();
            act1 = read(act);
            m->group->drain();
          }
        });
        CHECK(grad0 == std::vector<float>{7, 8});
        CHECK(act1 == std::vector<float>{1, 2, 3, 4});
      }
    }
  }
}

TEST_CASE("Group: staged pinned memory stays within its bound, landing old results early", "[parallel][group]") {
  // 12 paired transfers (landed late) and 12 reduce-scatters in flight at once through at most
  // 64 bytes of pinned memory: posts wait for and land the oldest operations.
  comm::test::Job job(comm::test::Impl::kInProcess, 2);
  std::vector<size_t> pinned(2), buffers(2);
  run_threads(2, [&](int rank) {
    auto m = member(job, rank, 2, Way::kStaged, Group::Options{.max_pinned_bytes = 64});
    Group& g = *m->group;
    std::vector<device::DeviceArray<float>> outs, ins;
    std::vector<Work> works;
    for (int i = 0; i < 12; ++i) {
      outs.emplace_back(*m->mem, 4);
      ins.emplace_back(*m->mem, 4);
      outs.back().upload(std::vector<float>{float(i), float(rank), float(i * rank), 7});
      const Transfer ops[] = {{Transfer::kSend, Buf::f32(outs.back().data(), 4), 1 - rank, uint32_t(i)},
                              {Transfer::kRecv, Buf::f32(ins.back().data(), 4), 1 - rank, uint32_t(i)}};
      works.push_back(g.send_recv(ops));
    }
    for (int i = 0; i < 12; ++i) {
      works[i].land();
      CHECK(read(ins[i]) == std::vector<float>{float(i), float(1 - rank), float(i * (1 - rank)), 7});
    }
    std::vector<device::DeviceArray<float>> grads, chunks;
    works.clear();
    for (int i = 0; i < 12; ++i) {
      grads.emplace_back(*m->mem, 4);
      chunks.emplace_back(*m->mem, 2);
      grads.back().upload(std::vector<float>{float(i), 1, float(rank), 2});
      works.push_back(g.reduce_scatter(Buf::f32(chunks.back().data(), 2), Buf::f32(grads.back().data(), 4),
                                       comm::ReduceOp::kSum));
    }
    for (int i = 0; i < 12; ++i) {
      works[i].land();
      CHECK(read(chunks[i]) == (rank == 0 ? std::vector<float>{2.f * i, 2} : std::vector<float>{1, 4}));
    }
    g.drain();
    pinned[rank] = g.pinned_bytes();
    buffers[rank] = g.pinned_buffers();
  });
  // At most 64 bytes, plus one 16-byte buffer when nothing else could be freed.
  CHECK(pinned[0] <= 80);
  CHECK(pinned[1] <= 80);
  CHECK(buffers[0] > 0);
}

TEST_CASE("Group: a peer that never receives fails the landing, naming it", "[parallel][group]") {
  for (Way way : {Way::kHost, Way::kStaged}) {
    DYNAMIC_SECTION(name_of(way)) {
      comm::test::Job job(comm::test::Impl::kInProcess, 2);
      std::string seen;
      run_threads(2, [&](int rank) {
        auto m = member(job, rank, 2, way, {}, std::chrono::milliseconds(300));
        if (rank == 1) return;  // never posts its half
        device::DeviceArray<float> in(*m->mem, 3);
        const Transfer recv[] = {{Transfer::kRecv, Buf::f32(in.data(), 3), 1, 5}};
        Work w = m->group->send_recv(recv);
        try {
          w.land();
        } catch (const comm::CommError& e) {
          seen = e.what();
        }
        m->group->abandon();
      });
      CHECK_THAT(seen, Catch::Matchers::Contains("peer 1"));
    }
  }
}

TEST_CASE("Group: a device group is called at once, on the compute queue for transfers and the side queue "
          "beside the compute",
          "[parallel][group]") {
  comm::test::Job job(comm::test::Impl::kInProcess, 2);
  run_threads(2, [&](int rank) {
    auto m = member(job, rank, 2, Way::kDevice);
    auto& mem = static_cast<HostAsDevice&>(*m->mem);
    auto& dev = static_cast<DeviceOnlyGroup&>(*m->device);
    device::DeviceArray<float> out(mem, 2), in(mem, 2), chunk(mem, 1);
    out.upload(std::vector<float>{float(rank), 3});
    const Transfer ops[] = {{Transfer::kSend, Buf::f32(out.data(), 2), 1 - rank, 1},
                            {Transfer::kRecv, Buf::f32(in.data(), 2), 1 - rank, 1}};
    Work w = m->group->send_recv(ops);
    CHECK_FALSE(w.pending());  // enqueued: ordered on the compute queue with what reads it
    CHECK(read(in) == std::vector<float>{float(1 - rank), 3});
    CHECK(dev.streams().at("send_recv") == std::set<void*>{mem.stream()});
    Work rs = m->group->reduce_scatter(Buf::f32(chunk.data(), 1), Buf::f32(out.data(), 2), comm::ReduceOp::kSum);
    CHECK(dev.streams().at("reduce_scatter") == std::set<void*>{mem.side_stream()});
    CHECK(mem.orders_to_side() == 1);                       // after what the compute queue held
    CHECK(mem.holds(mem.side_stream(), mem.stream()) == 0);  // not yet landed
    rs.land();
    CHECK(mem.holds(mem.side_stream(), mem.stream()) == 1);  // the compute queue waits, not the host
    CHECK(read(chunk) == std::vector<float>{rank == 0 ? 1.f : 6.f});
    CHECK(m->group->pinned_buffers() == 0);
  });
}

TEST_CASE("Group: compute-order sums are tallied by message size until reset", "[parallel][group]") {
  // What a calibration prices tensor-parallel sums from (train::apply_step_sums): the sums a
  // step really did, by their bytes on the host group (bf16 widened to fp32), and their time.
  for (Way way : {Way::kHost, Way::kStaged}) {
    DYNAMIC_SECTION(name_of(way)) {
      comm::test::Job job(comm::test::Impl::kInProcess, 2);
      run_threads(2, [&](int rank) {
        auto m = member(job, rank, 2, way);
        Group& g = *m->group;
        CHECK(g.sums().empty());
        device::DeviceArray<float> x(*m->mem, 8);
        x.upload(std::vector<float>(8, 1.0f));
        for (int i = 0; i < 3; ++i) g.all_reduce(Buf::f32(x.data(), 8), comm::ReduceOp::kSum);
        device::DeviceArray<model::bf16> h(*m->mem, 4);
        h.upload(std::vector<model::bf16>(4, model::float_to_bf16(1.0f)));
        g.all_reduce(Buf{h.data(), 4, comm::DType::kBf16}, comm::ReduceOp::kSum);
        REQUIRE(g.sums().size() == 2);
        CHECK(g.sums().at(32).calls == 3);
        CHECK(g.sums().at(32).seconds > 0);
        CHECK(g.sums().at(16).calls == 1);  // 4 bf16 values travel as 16 bytes of fp32
        g.reset_sums();
        CHECK(g.sums().empty());
      });
    }
  }
}
