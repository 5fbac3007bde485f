#include "comm/gloo_group.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <net/if.h>
#include <signal.h>

#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <list>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
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
constexpr uint8_t kAllGatherPrefix = 0x42;
constexpr uint8_t kBroadcastPrefix = 0x43;
constexpr uint8_t kAllToAllPrefix = 0x45;
// A slot nobody sends on: each member keeps one receive posted there from each peer (the
// connection's health buffer, see WaitWatch).
constexpr uint64_t kHealthSlot = static_cast<uint64_t>(0x44) << 56;

uint64_t slot(uint8_t prefix, uint32_t tag, uint32_t step = 0) {
  return (static_cast<uint64_t>(prefix) << 56) | (static_cast<uint64_t>(tag) << 24) | (step & 0xffffff);
}


// Gloo's TCP connection fails the waits it knows about when it breaks (end of file, reset),
// but not a send it has already queued for its socket: an unbound send whose first write
// found the peer just dead stays in that queue, and its wait lasts the whole time-out
// (cluster.timeout_s, minutes) although the connection is known to be gone. A rank of a
// job whose neighbour was killed hung that way. So every wait of these groups is watched.
// Each member keeps a receive posted from every peer on a slot nobody sends on (the
// connection's health buffer): a broken connection fails it with the connection's error
// like every other receive it holds. Every kPeriod this thread looks at the health buffer
// of each wait older than that (abort first, then wait: a wait that was aborted returns at
// once, or rethrows the error it was failed with; Gloo has no other way to ask) and aborts
// the wait of a connection still broken kConfirm later; the waiter then throws that error.
// Not at once: a peer that sends its last message and closes (the end of a job) breaks the
// connection right after the wait completed, and Gloo's abort wins over a completion the
// waiter has not returned with yet; a wait still there kConfirm after the break (the waiter
// leaves within microseconds of its completion, or one CPU-quota period when throttled) is
// one that never completed. One thread per process, started on first use.
// The same list serves GlooGroup::abort: it fails every wait of that group at once, and every
// wait the group starts afterwards.
class WaitWatch {
 public:
  static constexpr auto kPeriod = std::chrono::milliseconds(100);
  static constexpr auto kConfirm = std::chrono::milliseconds(300);
  static constexpr const char* kAborted = "aborted: this process is stopping after a failure elsewhere";
  struct Wait {
    gloo::transport::UnboundBuffer* buf;
    gloo::transport::UnboundBuffer* health;  // the health buffer of the connection waited on
    bool send;
    const void* owner;  // the group
    std::chrono::steady_clock::time_point since;
    std::string error;                               // the connection's, once seen broken
    std::chrono::steady_clock::time_point broken{};  // when it was first seen broken
    bool aborted = false;                            // this thread aborted the wait
  };
  using Handle = std::list<Wait>::iterator;

  static WaitWatch& instance() {
    static const bool hooked = [] {
      // A forked child has no watch thread and may hold a copy of the lock taken: it starts
      // afresh (the old instance is left as it is).
      ::pthread_atfork(nullptr, nullptr, [] { current_.store(new WaitWatch); });
      current_.store(new WaitWatch);
      return true;
    }();
    (void)hooked;
    return *current_.load();
  }

  Handle add(gloo::transport::UnboundBuffer* buf, gloo::transport::UnboundBuffer* health, bool send,
             const void* owner) {
    std::lock_guard<std::mutex> lock(m_);
    if (!started_) {
      std::thread([this] { run(); }).detach();  // never joined: the instance is never destroyed
      started_ = true;
    }
    if (waits_.empty()) cv_.notify_one();  // the thread sleeps only while there is no wait
    waits_.push_back({buf, health, send, owner, std::chrono::steady_clock::now(), {}, {}, false});
    if (aborted_.count(owner)) abort(waits_.back(), kAborted);  // the wait returns at once
    return std::prev(waits_.end());
  }
  // Fails every wait of `owner`, now and from now on (until forget).
  void abort_owner(const void* owner) {
    std::lock_guard<std::mutex> lock(m_);
    aborted_.insert(owner);
    for (Wait& w : waits_)
      if (w.owner == owner && !w.aborted) abort(w, kAborted);
  }
  // `owner` is gone (its address may be reused).
  void forget(const void* owner) {
    std::lock_guard<std::mutex> lock(m_);
    aborted_.erase(owner);
  }
  // The connection's error when the wait was aborted, "" otherwise.
  std::string remove(Handle h) {
    std::lock_guard<std::mutex> lock(m_);
    std::string failed = h->aborted ? std::move(h->error) : std::string();
    waits_.erase(h);
    return failed;
  }

 private:
  WaitWatch() = default;
  // Under m_. Gloo keeps the abort until the buffer's next wait, which returns at once.
  static void abort(Wait& w, std::string error) {
    w.error = std::move(error);
    w.aborted = true;
    if (w.send) w.buf->abortWaitSend();
    else w.buf->abortWaitRecv();
  }
  void run() {
    std::unique_lock<std::mutex> lock(m_);
    for (;;) {
      cv_.wait(lock, [&] { return !waits_.empty(); });
      cv_.wait_for(lock, kPeriod);  // add() notifies only an empty watch: this sleeps the period
      const auto now = std::chrono::steady_clock::now();
      for (Wait& w : waits_) {
        if (w.aborted || now - w.since < kPeriod) continue;
        if (w.error.empty()) {
          try {
            w.health->abortWaitRecv();
            w.health->waitRecv(nullptr, std::chrono::hours(1));  // returns at once: aborted
          } catch (const std::exception& e) {
            w.error = *e.what() ? e.what() : "connection failed";
            w.broken = now;
          }
        }
        if (!w.error.empty() && now - w.broken >= kConfirm)  // broken, and the wait still there
          abort(w, std::move(w.error));
      }
    }
  }

  static inline std::atomic<WaitWatch*> current_{nullptr};
  std::mutex m_;
  std::condition_variable cv_;
  std::list<Wait> waits_;
  std::set<const void*> aborted_;
  bool started_ = false;
};

class GlooGroup : public ProcessGroup {
 public:
  GlooGroup(std::shared_ptr<Store> store, GroupSpec spec, const GlooNet& net)
      : ProcessGroup(std::move(spec)), store_(std::make_shared<PrefixStore>(store, "pg/" + name() + "/")) {
    connect(net);
  }

  ~GlooGroup() override {
    if (ctx_) ctx_->closeConnections();
    WaitWatch::instance().forget(this);
  }

  // Fails the operation another thread of this process runs on the group (a background
  // reduction the failing thread would otherwise wait for up to the time-out), and every
  // later one, at once. Says "gave up" in the group's store, as a failed member does, so that
  // the peers blame the real cause, not this member's closing connections.
  void abort() noexcept override {
    if (aborted_.exchange(true)) return;
    WaitWatch::instance().abort_owner(this);
    mark_gave_up(*store_, rank_);
  }

  std::string transport() const override { return transport_; }

  using ProcessGroup::all_reduce;
  void all_reduce(std::span<float> data, ReduceOp op, const OpOptions& o) override {
    run("all_reduce", -1, o, [&](Millis t, uint32_t tag) { ring_all_reduce(data, op, t, tag); });
  }

  void reduce_scatter(std::span<float> out, std::span<const float> in, ReduceOp op, const OpOptions& o) override {
    check_sizes("reduce_scatter", out.size() * size(), in.size(), in.size());
    run("reduce_scatter", -1, o, [&](Millis t, uint32_t tag) { ring_reduce_scatter(out, in, op, t, tag); });
  }

  void all_gather(std::span<float> out, std::span<const float> in, const OpOptions& o) override {
    check_sizes("all_gather", out.size(), in.size(), in.size() * size());
    run("all_gather", -1, o, [&](Millis t, uint32_t tag) { ring_all_gather(out, in, t, tag); });
  }

  // The root sends the whole buffer to every member itself (one buffer per member, so that
  // each wait is for one connection).
  void broadcast(std::span<float> data, int root, const OpOptions& o) override {
    if (root < 0 || root >= size())
      throw std::invalid_argument(fmt::format("broadcast on group '{}': root {} out of range", name(), root));
    run("broadcast", root == rank_ ? -1 : root, o, [&](Millis t, uint32_t tag) {
      if (data.empty() || size() == 1) return;
      const uint64_t s = slot(kBroadcastPrefix, tag);
      if (rank_ != root) {
        auto buf = ctx_->createUnboundBuffer(data.data(), data.size_bytes());
        buf->recv(root, s);
        wait(*buf, root, false, t);
        return;
      }
      std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> bufs(size());
      for (int q = 0; q < size(); ++q) {
        if (q == root) continue;
        bufs[q] = ctx_->createUnboundBuffer(data.data(), data.size_bytes());
        bufs[q]->send(q, s);
      }
      for (int q = 0; q < size(); ++q)
        if (q != root) wait(*bufs[q], q, true, t);
    });
  }

  // An all-reduce of one number: no member can have its result before every member entered.
  void barrier(const OpOptions& o) override {
    run("barrier", -1, o, [&](Millis t, uint32_t tag) {
      float x = 0;
      ring_all_reduce({&x, 1}, ReduceOp::kMax, t, tag);
    });
  }

  // Pairwise, all at once: one buffer per member each way (so that each wait is for one
  // connection), every receive and send posted, then the receives waited for, then the sends.
  // This member's own block is copied.
  using ProcessGroup::all_to_all_v;
  void all_to_all_v(void* out, std::span<const size_t> out_counts, const void* in, std::span<const size_t> in_counts,
                    DType dtype, const OpOptions& o) override {
    const std::vector<size_t> out_at = block_offsets("all_to_all_v", out_counts);
    const std::vector<size_t> in_at = block_offsets("all_to_all_v", in_counts);
    if (in_counts[rank_] != out_counts[rank_])
      throw std::invalid_argument(fmt::format("all_to_all_v on group '{}': rank {} sends itself {} elements but "
                                              "expects {}", name(), rank_, in_counts[rank_], out_counts[rank_]));
    const size_t es = dtype_bytes(dtype);
    auto* dst = static_cast<std::byte*>(out);
    auto* src = static_cast<std::byte*>(const_cast<void*>(in));  // Gloo's buffers are mutable; sends only read
    run("all_to_all_v", -1, o, [&](Millis t, uint32_t tag, int& blame) {
      if (in_counts[rank_] > 0) std::memcpy(dst + out_at[rank_] * es, src + in_at[rank_] * es, in_counts[rank_] * es);
      std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> recvs(size()), sends(size());
      for (int q = 0; q < size(); ++q) {
        if (q == rank_) continue;
        if (out_counts[q] > 0) {
          recvs[q] = ctx_->createUnboundBuffer(dst + out_at[q] * es, out_counts[q] * es);
          recvs[q]->recv(q, slot(kAllToAllPrefix, tag));
        }
        if (in_counts[q] > 0) {
          sends[q] = ctx_->createUnboundBuffer(src + in_at[q] * es, in_counts[q] * es);
          sends[q]->send(q, slot(kAllToAllPrefix, tag));
        }
      }
      const auto deadline = std::chrono::steady_clock::now() + t;
      for (auto* bufs : {&recvs, &sends})
        for (int q = 0; q < size(); ++q) {
          if (!(*bufs)[q]) continue;
          blame = q;
          auto left =
              std::max(Millis(1), std::chrono::duration_cast<Millis>(deadline - std::chrono::steady_clock::now()));
          wait(*(*bufs)[q], q, bufs == &sends, left);
        }
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
      // Receives first, so on_received fires while the sends may still be on the wire.
      for (const P2POp::Kind kind : {P2POp::kRecv, P2POp::kSend}) {
        for (size_t i = 0; i < ops.size(); ++i) {
          if (ops[i].kind != kind) continue;
          blame = ops[i].peer;
          auto left =
              std::max(Millis(1), std::chrono::duration_cast<Millis>(deadline - std::chrono::steady_clock::now()));
          wait(*bufs[i], ops[i].peer, kind == P2POp::kSend, left);
        }
        if (kind == P2POp::kRecv && o.on_received) o.on_received();
      }
    }, false);
  }

 private:
  void connect(const GlooNet& net);
  void wait_all_connected();
  void ring_all_reduce(std::span<float> data, ReduceOp op, Millis t, uint32_t tag);
  void ring_reduce_scatter(std::span<float> out, std::span<const float> in, ReduceOp op, Millis t, uint32_t tag);
  void ring_all_gather(std::span<float> out, std::span<const float> in, Millis t, uint32_t tag);

  // Waits for one send (or receive) of `buf` with group member `peer`, watched by WaitWatch:
  // throws the connection's error when the watch found it broken.
  void wait(gloo::transport::UnboundBuffer& buf, int peer, bool send, Millis t) {
    WaitWatch& watch = WaitWatch::instance();
    const WaitWatch::Handle h = watch.add(&buf, health_.at(peer).get(), send, this);
    try {
      send ? buf.waitSend(t) : buf.waitRecv(t);
    } catch (...) {
      watch.remove(h);
      throw;
    }
    if (std::string failed = watch.remove(h); !failed.empty()) throw std::runtime_error(failed);
  }

  // Runs one operation; on failure marks the group broken and throws CommError with the
  // peer found by diagnose(). Collectives draw a tag from a counter every member advances
  // in step (same call order); point-to-point uses the caller's tag.
  template <class Fn>
  void run(const char* op, int peer, const OpOptions& o, Fn fn, bool collective = true) {
    if (!broken_.empty())  // naming the earlier failure's peer and why, for a reader of this one
      throw CommError(where(op, peer >= 0 ? peer : broken_peer_), "group is broken by an earlier failure: " + broken_);
    const uint32_t tag = collective ? next_tag_++ : 0;
    try {
      if constexpr (std::is_invocable_v<Fn, Millis, uint32_t, int&>) fn(timeout_of(o), tag, peer);
      else fn(timeout_of(o), tag);
    } catch (const std::exception& e) {
      if (aborted_) {  // no peer to find: this process gave up
        broken_ = fmt::format("{} #{} at rank {} (aborted)", op, tag, rank_);
        throw CommError(where(op, -1), e.what());
      }
      std::function<std::optional<std::string>(int)> gone;
      if (spec().known_gone) gone = [this](int q) { return spec().known_gone(global_rank_of(q)); };
      Suspect s = diagnose_gloo_failure(*ctx_, *store_, rank_, peer, op, tag, timeout_of(o), gone);
      broken_ = fmt::format("{} #{} at rank {}: {}", op, tag, rank_, s.reason);
      broken_peer_ = s.peer;
      throw CommError(where(op, s.peer), fmt::format("{}; {}", s.reason, e.what()));
    }
  }

  CommError::Where where(const char* op, int peer) const {
    return {op, name(), rank_, global_rank_of(rank_), peer, peer >= 0 ? global_rank_of(peer) : -1};
  }

  std::shared_ptr<Store> store_;  // this group's prefix of the job store
  std::shared_ptr<gloo::rendezvous::Context> ctx_;
  // Per peer: a receive posted on kHealthSlot, which only a broken connection completes (with
  // its error); null for this member.
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> health_;
  uint32_t next_tag_ = 1;
  std::string broken_;
  int broken_peer_ = -1;  // the peer the failure that broke the group named (-1: none)
  std::atomic<bool> aborted_{false};
  std::vector<float> scratch_;  // reduce_scatter: 2 receive + 2 work chunks
  std::vector<float> padded_;   // all_reduce: a copy padded to a multiple of the size
  std::vector<float> chunk_;    // all_reduce: this member's reduced chunk
  std::string transport_;
};

// First interface of a comma-separated list that exists here; "" when none does.
std::string present_interface(const std::string& list) {
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = std::min(list.find(',', start), list.size());
    std::string name = list.substr(start, comma - start);
    if (!name.empty() && ::if_nametoindex(name.c_str()) != 0) return name;
    start = comma + 1;
  }
  return "";
}

void GlooGroup::connect(const GlooNet& net) {
  gloo::transport::tcp::attr attr;
  if (!net.iface.empty()) {
    attr.iface = present_interface(net.iface);
    if (attr.iface.empty())
      throw CommError(where("connect", -1), fmt::format("none of the interface(s) '{}' exists on this machine; "
                                                        "see `ip link` for the ones that do",
                                                        net.iface));
  } else {
    attr.hostname = net.address;
  }
  transport_ = fmt::format("gloo tcp {}", !attr.iface.empty()    ? attr.iface
                                          : !net.address.empty() ? net.address
                                                                 : "(host name)");
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
  wait_all_connected();
  static char health_byte = 0;  // never written: nobody sends on kHealthSlot
  health_.resize(static_cast<size_t>(size()));
  for (int q = 0; q < size(); ++q) {
    if (q == rank_) continue;
    health_[q] = ctx_->createUnboundBuffer(&health_byte, 1);
    health_[q]->recv(q, kHealthSlot);
  }
}

// connectFullMesh returns on a member once ITS pairs are connected, while a peer may still be
// reading the last handshake. A member that failed or left right after creating the group
// would then reset that handshake and the peer would report a confusing connect error
// instead of a closed peer. So every member waits here until all have connected.
void GlooGroup::wait_all_connected() {
  std::vector<std::string> keys;
  for (int r = 0; r < size(); ++r) keys.push_back(fmt::format("connected/{}", r));
  store_->set(keys[rank_], Bytes{'1'});
  try {
    store_->wait(keys, spec_.timeout);
  } catch (const std::exception& e) {
    std::vector<int> absent;
    try {
      for (const auto& k : store_->missing(keys)) absent.push_back(std::stoi(k.substr(k.rfind('/') + 1)));
    } catch (const std::exception&) {
    }
    broken_ = "connect failed";
    throw CommError(where("connect", absent.empty() ? -1 : absent.front()),
                    fmt::format("member(s) [{}] did not finish connecting within {} ms; {}", fmt::join(absent, ","),
                                spec_.timeout.count(), e.what()));
  }
}

// Ring all-reduce: the reduce-scatter below into this member's chunk of ceil(n / p), then the
// all-gather of the chunks back into place (a length that p does not divide goes through a
// copy padded with zeros, which no member reads back). Our own rather than Gloo's, so that
// every wait is one WaitWatch sees.
void GlooGroup::ring_all_reduce(std::span<float> data, ReduceOp op, Millis t, uint32_t tag) {
  const int p = size();
  const size_t n = data.size();
  if (p == 1 || n == 0) return;
  const size_t m = (n + static_cast<size_t>(p) - 1) / static_cast<size_t>(p);
  std::span<float> whole = data;
  if (m * static_cast<size_t>(p) != n) {
    padded_.assign(m * static_cast<size_t>(p), 0.f);
    std::copy(data.begin(), data.end(), padded_.begin());
    whole = padded_;
  }
  if (chunk_.size() < m) chunk_.resize(m);
  const std::span<float> mine(chunk_.data(), m);
  ring_reduce_scatter(mine, whole, op, t, tag);
  ring_all_gather(whole, mine, t, tag);
  if (whole.data() != data.data()) std::copy_n(whole.begin(), n, data.begin());
}

// Ring reduce-scatter over unbound buffers (Gloo's own one has no per-op time-out).
// At step s (0 .. p-2) rank r sends chunk (r - s - 1) to r + 1 and receives chunk
// (r - s - 2) from r - 1, folding its own input chunk in; what it folded at step s is what
// it sends at step s + 1, and after the last step it holds chunk r complete. Chunks: [n].
// Scratch is O(n): two receive and two work buffers, alternating so the next receive is
// posted, and the previous send still in flight, while this step reduces.
void GlooGroup::ring_reduce_scatter(std::span<float> out, std::span<const float> in, ReduceOp op, Millis t,
                                    uint32_t tag) {
  const int p = size();
  const size_t n = out.size(), bytes = n * sizeof(float);
  if (p == 1 || n == 0) return void(std::copy(in.begin(), in.end(), out.begin()));
  const int next = (rank_ + 1) % p, prev = (rank_ + p - 1) % p;
  auto chunk = [&](int s, int shift) { return static_cast<size_t>(((rank_ - s - shift) % p + p) % p); };
  // Kept between calls: fresh buffers of this size cost more in page faults than the op.
  if (scratch_.size() < 4 * n) scratch_.resize(4 * n);
  float* inc[2] = {scratch_.data(), scratch_.data() + n};
  float* work[2] = {scratch_.data() + 2 * n, scratch_.data() + 3 * n};
  std::unique_ptr<gloo::transport::UnboundBuffer> inc_buf[2], work_buf[2];
  for (int k = 0; k < 2; ++k) {
    inc_buf[k] = ctx_->createUnboundBuffer(inc[k], bytes);
    work_buf[k] = ctx_->createUnboundBuffer(work[k], bytes);
  }
  auto in_buf = ctx_->createUnboundBuffer(const_cast<float*>(in.data()), in.size_bytes());  // only read
  gloo::transport::UnboundBuffer* in_flight[2] = {nullptr, nullptr};  // send of step s sits at [s % 2]
  inc_buf[0]->recv(prev, slot(kReduceScatterPrefix, tag, 0));
  in_buf->send(next, slot(kReduceScatterPrefix, tag, 0), chunk(0, 1) * bytes, bytes);
  in_flight[0] = in_buf.get();
  for (int s = 0; s < p - 1; ++s) {
    const bool last = s == p - 2;
    if (!last) inc_buf[(s + 1) % 2]->recv(prev, slot(kReduceScatterPrefix, tag, s + 1));
    wait(*inc_buf[s % 2], prev, false, t);
    // work[s % 2] was last sent at step s - 1: that send must be done before we overwrite it.
    if (s >= 1 && in_flight[(s - 1) % 2]) {
      wait(*in_flight[(s - 1) % 2], next, true, t);
      in_flight[(s - 1) % 2] = nullptr;
    }
    float* dst = last ? out.data() : work[s % 2];
    const float* mine = in.data() + chunk(s, 2) * n;
    const float* got = inc[s % 2];
    if (op == ReduceOp::kSum)
      for (size_t i = 0; i < n; ++i) dst[i] = got[i] + mine[i];
    else
      for (size_t i = 0; i < n; ++i) dst[i] = std::max(got[i], mine[i]);
    if (!last) {
      work_buf[s % 2]->send(next, slot(kReduceScatterPrefix, tag, s + 1));
      in_flight[(s + 1) % 2] = work_buf[s % 2].get();
    }
  }
  for (auto* b : in_flight)
    if (b) wait(*b, next, true, t);
}

// Ring all-gather over unbound buffers, straight into `out`: at step s (0 .. p-2) rank r sends
// chunk (r - s) to r + 1 and receives chunk (r - s - 1) from r - 1, both posted together. Gloo's
// own allgather reached only about 60% of a shaped link's rate with two members (the lab
// measured it, docs/lab.md); this one moves (p-1)/p of the buffer per rank at the link's rate.
void GlooGroup::ring_all_gather(std::span<float> out, std::span<const float> in, Millis t, uint32_t tag) {
  const int p = size();
  const size_t n = in.size(), bytes = n * sizeof(float);
  std::copy(in.begin(), in.end(), out.begin() + static_cast<size_t>(rank_) * n);
  if (p == 1 || n == 0) return;
  const int next = (rank_ + 1) % p, prev = (rank_ + p - 1) % p;
  auto chunk = [&](int s) { return static_cast<size_t>(((rank_ - s) % p + p) % p); };
  auto buf = ctx_->createUnboundBuffer(out.data(), out.size_bytes());
  for (int s = 0; s < p - 1; ++s) {
    buf->recv(prev, slot(kAllGatherPrefix, tag, s), chunk(s + 1) * bytes, bytes);
    buf->send(next, slot(kAllGatherPrefix, tag, s), chunk(s) * bytes, bytes);
    wait(*buf, prev, false, t);
    wait(*buf, next, true, t);
  }
}

}  // namespace

std::unique_ptr<ProcessGroup> make_gloo_group(const std::shared_ptr<Store>& store, GroupSpec spec,
                                              const GlooNet& net) {
  // Gloo writes to its sockets without MSG_NOSIGNAL: when a peer dies, the default SIGPIPE
  // would kill this process instead of letting the operation fail with a CommError naming
  // the peer. Ignore it unless someone installed a handler of their own.
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction old {};
    if (::sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) ::signal(SIGPIPE, SIG_IGN);
  });
  return std::make_unique<GlooGroup>(store, std::move(spec), net);
}

}  // namespace holmes::comm
