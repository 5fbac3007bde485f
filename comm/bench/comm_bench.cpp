// holmes-comm-bench: loopback throughput of the Gloo process group, one thread per rank
// in this process (each with its own TCP store client and Gloo context, as separate
// processes would have). Prints time per op and bus bandwidth (NCCL's convention:
// all_reduce moves 2(p-1)/p of the buffer per rank, reduce_scatter/all_gather (p-1)/p).
//   holmes-comm-bench [world=4] [elements=4194304] [iterations=10]
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <thread>
#include <vector>

#include "comm/gloo_group.hpp"
#include "comm/tcp_store.hpp"

using namespace holmes::comm;

int main(int argc, char** argv) {
  const int world = argc > 1 ? std::atoi(argv[1]) : 4;
  const size_t n = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : (size_t{1} << 22);
  const int iters = argc > 3 ? std::atoi(argv[3]) : 10;
  if (world < 2 || n % world != 0 || iters < 1) {
    fmt::print(stderr, "usage: holmes-comm-bench [world>=2] [elements, a multiple of world] [iterations>=1]\n");
    return 2;
  }
  auto host = TcpStore::host({"", 0, "bench", std::chrono::seconds(30)});
  std::vector<double> secs(3, 0.0);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      std::shared_ptr<Store> store = host;
      if (r) store = TcpStore::connect({"127.0.0.1", host->port(), "bench", std::chrono::seconds(30)});
      std::vector<int> members(world);
      for (int i = 0; i < world; ++i) members[i] = i;
      auto pg = make_gloo_group(store, {"bench", members, r, std::chrono::seconds(60)}, {"", "127.0.0.1"});
      std::vector<float> buf(n, 1.f), shard(n / world, 1.f);
      std::vector<std::function<void()>> ops{
          [&] { pg->all_reduce(buf, ReduceOp::kSum); },
          [&] { pg->reduce_scatter(shard, buf, ReduceOp::kSum); },
          [&] { pg->all_gather(buf, shard); }};
      for (size_t k = 0; k < ops.size(); ++k) {
        ops[k]();  // warm-up
        pg->barrier();
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < iters; ++i) ops[k]();
        pg->barrier();
        if (r == 0) secs[k] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
      }
    });
  for (auto& t : threads) t.join();
  const double bytes = static_cast<double>(n) * sizeof(float), p = world;
  const char* names[] = {"all_reduce", "reduce_scatter", "all_gather"};
  const double factor[] = {2 * (p - 1) / p, (p - 1) / p, (p - 1) / p};
  fmt::print("gloo loopback, {} ranks, {} floats ({:.1f} MiB), {} iterations\n", world, n, bytes / (1 << 20), iters);
  for (int k = 0; k < 3; ++k)
    fmt::print("  {:<15} {:9.3f} ms  busbw {:6.2f} GB/s\n", names[k], secs[k] * 1e3, bytes * factor[k] / secs[k] / 1e9);
  return 0;
}
