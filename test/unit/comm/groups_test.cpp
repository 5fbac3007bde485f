// One body per operation, run on every implementation (Gloo over loopback TCP and
// in-process) with 2, 3 and 4 ranks; results are checked in the main thread (Catch2 is
// not thread-safe) against expectations computed here. Values are small integers so sums
// are exact in float whatever the reduction order.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "comm/errors.hpp"
#include "test/support/harness.hpp"

using namespace holmes::comm;
using namespace holmes::comm::test;

namespace {

// Input of rank r, element i: distinct per rank and element, exact in float.
float value(int r, size_t i) { return static_cast<float>((r + 1) * 3 + static_cast<int>(i % 17) * (r % 2 ? -1 : 1)); }

std::vector<float> input(int r, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = value(r, i);
  return v;
}

float reduce(int world, size_t i, ReduceOp op) {
  float acc = value(0, i);
  for (int r = 1; r < world; ++r) acc = op == ReduceOp::kSum ? acc + value(r, i) : std::max(acc, value(r, i));
  return acc;
}

}  // namespace

TEST_CASE("collectives match a computed expectation on every implementation", "[comm]") {
  for (Impl impl : {Impl::kInProcess, Impl::kGloo}) {
    for (int world : {2, 3, 4}) {
      DYNAMIC_SECTION(impl_name(impl) << " with " << world << " ranks") {
        Job job(impl, world);
        const size_t n = 13;  // odd on purpose; reduce-scatter uses n per rank
        std::vector<std::vector<float>> sum(world), max(world), rs_sum(world), rs_max(world), gathered(world),
            bcast(world);
        run_ranks(world, [&](int r) {
          auto store = job.store_for(r);
          auto pg = job.group(store, "world", job.all_ranks(), r);
          sum[r] = input(r, n);
          pg->all_reduce(sum[r], ReduceOp::kSum);
          max[r] = input(r, n);
          pg->all_reduce(max[r], ReduceOp::kMax);
          auto big = input(r, n * world);
          rs_sum[r].resize(n);
          pg->reduce_scatter(rs_sum[r], big, ReduceOp::kSum);
          rs_max[r].resize(n);
          pg->reduce_scatter(rs_max[r], big, ReduceOp::kMax);
          gathered[r].resize(n * world);
          auto mine = input(r, n);
          pg->all_gather(gathered[r], mine);
          bcast[r] = input(r, n);
          pg->broadcast(bcast[r], world - 1);
          pg->barrier();
        });
        for (int r = 0; r < world; ++r) {
          for (size_t i = 0; i < n; ++i) {
            CHECK(sum[r][i] == reduce(world, i, ReduceOp::kSum));
            CHECK(max[r][i] == reduce(world, i, ReduceOp::kMax));
            CHECK(rs_sum[r][i] == reduce(world, r * n + i, ReduceOp::kSum));
            CHECK(rs_max[r][i] == reduce(world, r * n + i, ReduceOp::kMax));
            CHECK(bcast[r][i] == value(world - 1, i));
          }
          for (int q = 0; q < world; ++q)
            for (size_t i = 0; i < n; ++i) CHECK(gathered[r][q * n + i] == value(q, i));
        }
      }
    }
  }
}

TEST_CASE("tagged send and recv keep per-tag order on every implementation", "[comm]") {
  for (Impl impl : {Impl::kInProcess, Impl::kGloo}) {
    for (int world : {2, 3, 4}) {
      DYNAMIC_SECTION(impl_name(impl) << " with " << world << " ranks") {
        Job job(impl, world);
        std::vector<std::vector<float>> got(world);
        run_ranks(world, [&](int r) {
          auto store = job.store_for(r);
          auto pg = job.group(store, "world", job.all_ranks(), r);
          const int next = (r + 1) % world, prev = (r + world - 1) % world;
          // Two tags sent A1, B1, A2 and received B1, A1, A2, all posted together (sends
          // complete only against a posted recv): matching is by tag, in order.
          std::vector<float> a1(5, 100.f + r), a2(5, 200.f + r), b1(7, 300.f + r);
          std::vector<float> rb1(7), ra1(5), ra2(5);
          std::vector<P2POp> ops{{P2POp::kSend, a1, next, 1}, {P2POp::kSend, b1, next, 2},
                                 {P2POp::kSend, a2, next, 1}, {P2POp::kRecv, rb1, prev, 2},
                                 {P2POp::kRecv, ra1, prev, 1}, {P2POp::kRecv, ra2, prev, 1}};
          pg->send_recv(ops);
          got[r] = {rb1[0], rb1[6], ra1[0], ra1[4], ra2[0], ra2[4]};
          pg->barrier();
        });
        for (int r = 0; r < world; ++r) {
          const float p = static_cast<float>((r + world - 1) % world);
          CHECK(got[r] == std::vector<float>{300 + p, 300 + p, 100 + p, 100 + p, 200 + p, 200 + p});
        }
      }
    }
  }
}

TEST_CASE("blocking send and recv pair up between two ranks", "[comm]") {
  for (Impl impl : {Impl::kInProcess, Impl::kGloo}) {
    DYNAMIC_SECTION(impl_name(impl)) {
      Job job(impl, 2);
      std::vector<float> got(3);
      run_ranks(2, [&](int r) {
        auto store = job.store_for(r);
        auto pg = job.group(store, "world", job.all_ranks(), r);
        std::vector<float> msg{1.5f, -2.f, 7.f};
        if (r == 0) pg->send(msg, 1, 9);
        else pg->recv(got, 0, 9);
        pg->barrier();
      });
      CHECK(got == std::vector<float>{1.5f, -2.f, 7.f});
    }
  }
}

TEST_CASE("sub-groups from one store work side by side", "[comm]") {
  for (Impl impl : {Impl::kInProcess, Impl::kGloo}) {
    DYNAMIC_SECTION(impl_name(impl)) {
      Job job(impl, 4);
      std::vector<float> world_sum(4), pair_sum(4), pair_rank(4);
      run_ranks(4, [&](int r) {
        auto store = job.store_for(r);
        auto world = job.group(store, "world", job.all_ranks(), r);
        // {0,2} and {3,1}: the second lists its members out of order, so group rank 0 is global 3.
        std::vector<int> members = r % 2 == 0 ? std::vector<int>{0, 2} : std::vector<int>{3, 1};
        auto pair = job.group(store, r % 2 == 0 ? "even" : "odd", members, r);
        std::vector<float> x{static_cast<float>(r + 1)};
        pair->all_reduce(x, ReduceOp::kSum);
        pair_sum[r] = x[0];
        pair_rank[r] = static_cast<float>(pair->rank());
        std::vector<float> y{static_cast<float>(r + 1)};
        world->all_reduce(y, ReduceOp::kSum);
        world_sum[r] = y[0];
        world->barrier();
      });
      CHECK(world_sum == std::vector<float>{10, 10, 10, 10});
      CHECK(pair_sum == std::vector<float>{4, 6, 4, 6});
      CHECK(pair_rank == std::vector<float>{0, 1, 1, 0});
    }
  }
}

TEST_CASE("a group of one member copies through every operation", "[comm]") {
  for (Impl impl : {Impl::kInProcess, Impl::kGloo}) {
    DYNAMIC_SECTION(impl_name(impl)) {
      Job job(impl, 1);
      auto store = job.store_for(0);
      auto pg = job.group(store, "solo", {0}, 0);
      std::vector<float> x{1, 2, 3}, out(3), gathered(3);
      pg->all_reduce(x, ReduceOp::kSum);
      pg->reduce_scatter(out, x, ReduceOp::kMax);
      pg->all_gather(gathered, x);
      pg->broadcast(x, 0);
      pg->barrier();
      CHECK(x == std::vector<float>{1, 2, 3});
      CHECK(out == x);
      CHECK(gathered == x);
    }
  }
}

TEST_CASE("Gloo groups bind to the first present interface of a list and reject unknown ones", "[comm]") {
  Job job(Impl::kGloo, 2);
  std::vector<float> sums(2);
  run_ranks(2, [&](int r) {
    auto store = job.store_for(r);
    auto pg = make_gloo_group(store, {"lo", {0, 1}, r, std::chrono::seconds(10)}, GlooNet{"nonexistent0,lo", ""});
    std::vector<float> x{static_cast<float>(r + 1)};
    pg->all_reduce(x, ReduceOp::kSum);
    sums[r] = x[0];
  });
  CHECK(sums == std::vector<float>{3, 3});
  auto store = job.store_for(0);
  CHECK(job.group(store, "named", {0}, 0)->transport() == "gloo tcp 127.0.0.1");
  CHECK_THROWS_WITH(make_gloo_group(store, {"bad", {0}, 0, std::chrono::seconds(1)}, GlooNet{"nonexistent0", ""}),
                    Catch::Matchers::Contains("interface(s) 'nonexistent0'") && Catch::Matchers::Contains("connect"));
}

TEST_CASE("an in-process group name can be used again once every member left", "[comm]") {
  Job job(Impl::kInProcess, 2);
  for (int round = 0; round < 2; ++round) {
    std::vector<float> sums(2);
    run_ranks(2, [&](int r) {
      auto pg = job.group(nullptr, "again", {0, 1}, r);
      std::vector<float> x{static_cast<float>(r + round)};
      pg->all_reduce(x, ReduceOp::kSum);
      sums[r] = x[0];
      pg->barrier();
    });
    CHECK(sums == std::vector<float>{1.f + 2 * round, 1.f + 2 * round});
  }
}

TEST_CASE("all_reduce leaves bit-identical results on every member", "[comm]") {
  // Replicas must not drift: with non-integer values the summation order matters, so every
  // member has to receive the one reduced value rather than reduce in its own order.
  for (Impl impl : {Impl::kInProcess, Impl::kGloo}) {
    DYNAMIC_SECTION(impl_name(impl)) {
      const int world = 3;
      const size_t n = 3001;
      Job job(impl, world);
      std::vector<std::vector<float>> out(world);
      run_ranks(world, [&](int r) {
        auto store = job.store_for(r);
        auto pg = job.group(store, "world", job.all_ranks(), r);
        out[r].resize(n);
        uint32_t x = 12345u + 977u * static_cast<uint32_t>(r);
        for (auto& v : out[r]) {
          x = x * 1664525u + 1013904223u;
          v = static_cast<float>(x >> 8) * 1e-7f - 0.8f;
        }
        pg->all_reduce(out[r], ReduceOp::kSum);
      });
      for (int r = 1; r < world; ++r) CHECK(out[r] == out[0]);
    }
  }
}

TEST_CASE("send_recv reports its receives before its sends complete", "[comm]") {
  for (Impl impl : {Impl::kInProcess, Impl::kGloo}) {
    DYNAMIC_SECTION(impl_name(impl)) {
      Job job(impl, 2);
      std::atomic<bool> received{false};
      std::vector<float> got0(3), got1(4);
      run_ranks(2, [&](int r) {
        auto store = job.store_for(r);
        auto pg = job.group(store, "p2p", job.all_ranks(), r, std::chrono::seconds(10));
        if (r == 0) {
          std::vector<float> x = {1, 2, 3, 4};
          const P2POp ops[] = {{P2POp::kSend, x, 1, 9}, {P2POp::kRecv, got0, 1, 8}};
          pg->send_recv(ops, {.on_received = [&] { received = true; }});
        } else {
          std::vector<float> y = {7, 8, 9};
          pg->send(y, 0, 8);
          // Rank 0's send cannot complete before this receive is posted: only an early report
          // of its receive lets this rank go on.
          const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
          while (!received && std::chrono::steady_clock::now() < until)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
          CHECK(received);
          pg->recv(got1, 0, 9);
        }
      });
      CHECK(got0 == std::vector<float>{7, 8, 9});
      CHECK(got1 == std::vector<float>{1, 2, 3, 4});
    }
  }
}
