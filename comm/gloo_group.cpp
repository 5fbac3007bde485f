#include "comm/gloo_group.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <type_traits>

#include "comm/errors.hpp"
#include "comm/gloo_diagnose.hpp"
#include "comm/gloo_store.hpp"

namespace holmes::comm {

namespace {

// Our own slots use Gloo's layout (prefix << 56 | tag << 24 | step) with prefixes Gloo
// does not use (it takes 0x01-0x08).
constexpr uint8_t kReduceScatterPrefix = 0x40;
constexpr uint8_t kSendRecvPrefix = 0x41;

uint64_t slot(uint8_t prefix, uint32_t tag, uint32_t step = 0) {
  return (static_cast<uint64_t>(prefix) << 56) | (static_cast<uint64_t>(tag) << 24) | (step & 0xffffff);
}

void reduce_into(float* acc, const float* x, size_t n, ReduceOp op) {
  if (op == ReduceOp::kSum)
    for (size_t i = 0; i < n; ++i) acc[i] += x[i];
  else
    for (size_t i = 0; i < n; ++i) acc[i] = std::max(acc[i], x[i]);
}

class GlooGroup : public ProcessGroup {
 public:
  GlooGroup(std::shared_ptr<Store> store, GroupSpec spec, const GlooNet& net)
      : ProcessGroup(std::move(spec)), store_(std::make_shared<PrefixStore>(store, "pg/" + name() + "/")) {
    connect(net);
  }

  ~GlooGroup() override {
    if (ctx_) ctx_->closeConnections();
  }

  void all_reduce(std::span<float> data, ReduceOp op, const OpOptions& o) override {
    run("all_reduce", -1, o, [&](Millis t, uint32_t tag) {
      if (data.empty() || size() == 1) return;
      gloo::AllreduceOptions opts(ctx_);
      opts.setOutput(data.data(), data.size());
      using Fn = void (*)(void*, const void*, const void*, size_t);
      opts.setReduceFunction(op == ReduceOp::kSum ? static_cast<Fn>(&gloo::sum<float>)
                                                  : static_cast<Fn>(&gloo::max<float>));
      opts.setTag(tag);
      opts.setTimeout(t);
      gloo::allreduce(opts);
    });
  }

  void reduce_scatter(std::span<float> out, std::span<const float> in, ReduceOp op, const OpOptions& o) override {
    check_sizes("reduce_scatter", out.size() * size(), in.size(), in.size());
    run("reduce_scatter", -1, o, [&](Millis t, uint32_t tag) { ring_reduce_scatter(out, in, op, t, tag); });
  }

  void all_gather(std::span<float> out, std::span<const float> in, const OpOptions& o) override {
    check_sizes("all_gather", out.size(), in.size(), in.size() * size());
    run("all_gather", -1, o, [&](Millis t, uint32_t tag) {
      if (in.empty()) return;
      if (size() == 1) return void(std::copy(in.begin(), in.end(), out.begin()));
      gloo::AllgatherOptions opts(ctx_);
      opts.setInput(const_cast<float*>(in.data()), in.size());  // Gloo only reads it
      opts.setOutput(out.data(), out.size());
      opts.setTag(tag);
      opts.setTimeout(t);
      gloo::allgather(opts);
    });
  }

  void broadcast(std::span<float> data, int root, const OpOptions& o) override {
    if (root < 0 || root >= size())
      throw std::invalid_argument(fmt::format("broadcast on group '{}': root {} out of range", name(), root));
    run("broadcast", root == rank_ ? -1 : root, o, [&](Millis t, uint32_t tag) {
      if (data.empty() || size() == 1) return;
      gloo::BroadcastOptions opts(ctx_);
      opts.setOutput(data.data(), data.size());
      opts.setRoot(root);
      opts.setTag(tag);
      opts.setTimeout(t);
      gloo::broadcast(opts);
    });
  }

  void barrier(const OpOptions& o) override {
    run("barrier", -1, o, [&](Millis t, uint32_t tag) {
      if (size() == 1) return;
      gloo::BarrierOptions opts(ctx_);
      opts.setTag(tag);
      opts.setTimeout(t);
      gloo::barrier(opts);
    });
  }

  void send_recv(std::span<const P2POp> ops, const OpOptions& o) override {
    const char* op = ops.size() != 1 ? "send_recv" : ops[0].kind == P2POp::kSend ? "send" : "recv";
    for (const auto& x : ops) check_peer(op, x.peer);
    run(op, ops.size() == 1 ? ops[0].peer : -1, o, [&](Millis t, uint32_t, int& blame) {
      std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> bufs;
      for (const auto& x : ops) {
        bufs.push_back(ctx_->createUnboundBuffer(x.data.data(), x.data.size_bytes()));
        if (x.kind == P2POp::kSend) bufs.back()->send(x.peer, slot(kSendRecvPrefix, x.tag));
        else bufs.back()->recv(x.peer, slot(kSendRecvPrefix, x.tag));
      }
      const auto deadline = std::chrono::steady_clock::now() + t;
      for (size_t i = 0; i < ops.size(); ++i) {
        blame = ops[i].peer;
        auto left = std::max(Millis(1), std::chrono::duration_cast<Millis>(deadline - std::chrono::steady_clock::now()));
        if (ops[i].kind == P2POp::kSend) bufs[i]->waitSend(left);
        else bufs[i]->waitRecv(left);
      }
    }, false);
  }

 private:
  void connect(const GlooNet& net);
  void ring_reduce_scatter(std::span<float> out, std::span<const float> in, ReduceOp op, Millis t, uint32_t tag);

  // Runs one operation; on failure marks the group broken and throws CommError with the
  // peer found by diagnose(). Collectives draw a tag from a counter every member advances
  // in step (same call order); point-to-point uses the caller's tag.
  template <class Fn>
  void run(const char* op, int peer, const OpOptions& o, Fn fn, bool collective = true) {
    if (!broken_.empty())
      throw CommError(where(op, peer), "group is broken by an earlier failure: " + broken_);
    const uint32_t tag = collective ? next_tag_++ : 0;
    try {
      if constexpr (std::is_invocable_v<Fn, Millis, uint32_t, int&>) fn(timeout_of(o), tag, peer);
      else fn(timeout_of(o), tag);
    } catch (const std::exception& e) {
      Suspect s = diagnose_gloo_failure(*ctx_, *store_, rank_, peer, op, tag, timeout_of(o));
      broken_ = fmt::format("{} #{} at rank {}", op, tag, rank_);
      throw CommError(where(op, s.peer), fmt::format("{}; {}", s.reason, e.what()));
    }
  }

  CommError::Where where(const char* op, int peer) const {
    return {op, name(), rank_, global_rank_of(rank_), peer, peer >= 0 ? global_rank_of(peer) : -1};
  }

  std::shared_ptr<Store> store_;  // this group's prefix of the job store
  std::shared_ptr<gloo::rendezvous::Context> ctx_;
  uint32_t next_tag_ = 1;
  std::string broken_;
};

void GlooGroup::connect(const GlooNet& net) {
  gloo::transport::tcp::attr attr;
  if (!net.iface.empty()) attr.iface = net.iface;
  else attr.hostname = net.address;
  std::shared_ptr<gloo::transport::Device> dev;
  try {
    dev = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    throw CommError(where("connect", -1), fmt::format("cannot open a TCP device on {} '{}': {}",
                                                      net.iface.empty() ? "address" : "interface",
                                                      net.iface.empty() ? net.address : net.iface, e.what()));
  }
  ctx_ = std::make_shared<gloo::rendezvous::Context>(rank_, size());
  ctx_->setTimeout(spec_.timeout);
  GlooStoreAdapter adapter(store_, spec_.timeout);
  try {
    ctx_->connectFullMesh(adapter, dev);
  } catch (const std::exception& e) {
    // Gloo publishes one key per rank ("0", "1", ...): the absent ones never arrived.
    std::vector<std::string> keys;
    for (int r = 0; r < size(); ++r) keys.push_back(std::to_string(r));
    std::vector<int> absent;
    try {
      for (const auto& k : store_->missing(keys)) absent.push_back(std::stoi(k));
    } catch (const std::exception&) {
    }
    broken_ = "connect failed";
    std::string who = absent.empty() ? "every member published its address"
                                     : fmt::format("member(s) [{}] never arrived", fmt::join(absent, ","));
    throw CommError(where("connect", absent.empty() ? -1 : absent.front()), fmt::format("{}; {}", who, e.what()));
  }
}

// Ring reduce-scatter over unbound buffers (Gloo's own one has no per-op time-out).
// acc: [size * n], a copy of `in`. At step s, rank r sends chunk (r - s - 1) to r + 1 and
// folds chunk (r - s - 2) from r - 1 into acc; after size - 1 steps chunk r is complete
// on rank r. Each chunk is summed in ring order starting at rank c + 1.
void GlooGroup::ring_reduce_scatter(std::span<float> out, std::span<const float> in, ReduceOp op, Millis t,
                                    uint32_t tag) {
  const int p = size();
  const size_t n = out.size();
  if (p == 1 || n == 0) return void(std::copy(in.begin(), in.end(), out.begin()));
  std::vector<float> acc(in.begin(), in.end()), incoming(n);
  auto send_buf = ctx_->createUnboundBuffer(acc.data(), acc.size() * sizeof(float));
  auto recv_buf = ctx_->createUnboundBuffer(incoming.data(), n * sizeof(float));
  const int next = (rank_ + 1) % p, prev = (rank_ + p - 1) % p;
  auto chunk = [&](int s, int shift) { return static_cast<size_t>(((rank_ - s - shift) % p + p) % p); };
  for (int s = 0; s < p - 1; ++s) {
    recv_buf->recv(prev, slot(kReduceScatterPrefix, tag, s));
    send_buf->send(next, slot(kReduceScatterPrefix, tag, s), chunk(s, 1) * n * sizeof(float), n * sizeof(float));
    recv_buf->waitRecv(t);
    send_buf->waitSend(t);  // the next step overwrites no sent chunk, but bounds memory in flight
    reduce_into(acc.data() + chunk(s, 2) * n, incoming.data(), n, op);
  }
  std::copy(acc.begin() + rank_ * n, acc.begin() + (rank_ + 1) * n, out.begin());
}

}  // namespace

std::unique_ptr<ProcessGroup> make_gloo_group(const std::shared_ptr<Store>& store, GroupSpec spec,
                                              const GlooNet& net) {
  return std::make_unique<GlooGroup>(store, std::move(spec), net);
}

}  // namespace holmes::comm
