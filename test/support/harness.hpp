// Test harness: run one body on N ranks (threads), each with a ProcessGroup from a chosen
// implementation, so every test body runs on Gloo-over-loopback and in-process alike.
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/gloo_group.hpp"
#include "comm/inproc_group.hpp"
#include "comm/store.hpp"
#include "comm/tcp_store.hpp"

namespace holmes::comm::test {

enum class Impl { kGloo, kInProcess };
inline const char* impl_name(Impl i) { return i == Impl::kGloo ? "gloo" : "in-process"; }

// One simulated job: a TCP store hosted on a free loopback port (rank 0's) plus an
// in-process hub. Each rank thread asks it for its store and groups.
class Job {
 public:
  Job(Impl impl, int world) : impl_(impl), world_(world), hub_(std::make_shared<InProcessHub>()) {
    host_ = TcpStore::host({"", 0, "test-token", std::chrono::seconds(10)});
  }

  std::shared_ptr<Store> store_for(int rank) {
    if (rank == 0) return host_;
    return TcpStore::connect({"127.0.0.1", host_->port(), "test-token", std::chrono::seconds(10)});
  }

  std::unique_ptr<ProcessGroup> group(const std::shared_ptr<Store>& store, const std::string& name,
                                      std::vector<int> members, int global_rank,
                                      std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    GroupSpec spec{name, std::move(members), global_rank, timeout};
    if (impl_ == Impl::kGloo) return make_gloo_group(store, std::move(spec), GlooNet{"", "127.0.0.1"});
    return make_inproc_group(hub_, std::move(spec));
  }

  std::vector<int> all_ranks() const {
    std::vector<int> r(world_);
    for (int i = 0; i < world_; ++i) r[i] = i;
    return r;
  }

  Impl impl() const { return impl_; }
  int world() const { return world_; }

 private:
  Impl impl_;
  int world_;
  std::shared_ptr<InProcessHub> hub_;
  std::shared_ptr<TcpStore> host_;
};

// Runs body(rank) on `n` threads and rethrows the first exception after all joined.
inline void run_ranks(int n, const std::function<void(int)>& body) {
  std::vector<std::thread> threads;
  std::exception_ptr first;
  std::mutex m;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (...) {
        std::lock_guard<std::mutex> lock(m);
        if (!first) first = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace holmes::comm::test
