#include "comm/inproc_group.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <stdexcept>
#include <tuple>

#include "comm/errors.hpp"

namespace holmes::comm {

namespace detail {

using Clock = std::chrono::steady_clock;

// Shared state of one group. A collective is two phases: every member posts its input
// pointer and meets the others (phase 1), each computes its output from all inputs into a
// private buffer, then all meet again (phase 2) before anyone overwrites its buffer, so
// in-place operations are safe.
// A posted send: the sender's buffer, read by the receiver, who then sets `delivered`.
struct Letter {
  const float* data;
  size_t n;
  bool delivered;
};

struct InProcState {
  explicit InProcState(int n)
      : size(n), present(n, false), left(n, false), in(n), in_n(n), op(n), raw(n), counts(n), out_counts(n) {}

  std::mutex m;
  std::condition_variable cv;
  const int size;
  uint64_t round = 0;       // completed phases
  int arrived = 0;          // members in the current phase
  std::vector<bool> present, left;
  std::vector<const float*> in;
  std::vector<size_t> in_n;
  std::vector<std::string> op;
  std::vector<const std::byte*> raw;   // all_to_all_v: each member's input bytes
  // and copies of its send and receive counts, [size] each (a member that fails leaves them)
  std::vector<std::vector<size_t>> counts, out_counts;
  std::string broken;       // set once a member failed; later calls fail at once
  int broken_peer = -1;     // the member blamed for that failure
  std::map<std::tuple<int, int, uint32_t>, std::deque<Letter*>> mail;  // (src, dst, tag) -> posted sends

  int first_left() const {
    auto it = std::find(left.begin(), left.end(), true);
    return it == left.end() ? -1 : static_cast<int>(it - left.begin());
  }
};

}  // namespace detail

std::shared_ptr<detail::InProcState> InProcessHub::state_for(const GroupSpec& spec) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& s = groups_[spec.name];
  // A name whose members all left starts afresh (a test creating the same group twice).
  bool all_left = false;
  if (s) {
    std::lock_guard<std::mutex> state_lock(s->m);
    all_left = std::all_of(s->left.begin(), s->left.end(), [](bool l) { return l; });
  }
  if (all_left) s.reset();
  if (!s) s = std::make_shared<detail::InProcState>(static_cast<int>(spec.global_ranks.size()));
  if (s->size != static_cast<int>(spec.global_ranks.size()))
    throw std::invalid_argument(fmt::format("in-process group '{}' created with sizes {} and {}", spec.name, s->size,
                                            spec.global_ranks.size()));
  return s;
}

namespace {

using detail::Clock;
using Lock = std::unique_lock<std::mutex>;

class InProcGroup : public ProcessGroup {
 public:
  InProcGroup(std::shared_ptr<detail::InProcState> s, GroupSpec spec) : ProcessGroup(std::move(spec)), s_(std::move(s)) {}

  ~InProcGroup() override {
    Lock lock(s_->m);
    s_->left[rank_] = true;  // waiting members now fail naming this rank
    s_->cv.notify_all();
  }

  std::string transport() const override { return "in-process"; }

  using ProcessGroup::all_reduce;
  void all_reduce(std::span<float> data, ReduceOp op, const OpOptions& o) override {
    collective("all_reduce", data.data(), data.size(), o, [&](std::vector<float>& tmp) {
      // Same order on every member (0, 1, ...) so all get bit-identical sums.
      tmp.assign(s_->in[0], s_->in[0] + data.size());
      for (int r = 1; r < size(); ++r) combine(tmp.data(), s_->in[r], data.size(), op);
    }, data);
  }

  void reduce_scatter(std::span<float> out, std::span<const float> in, ReduceOp op, const OpOptions& o) override {
    check_sizes("reduce_scatter", out.size() * size(), in.size(), in.size());
    const size_t n = out.size();
    collective("reduce_scatter", in.data(), in.size(), o, [&](std::vector<float>& tmp) {
      tmp.assign(s_->in[0] + rank_ * n, s_->in[0] + (rank_ + 1) * n);
      for (int r = 1; r < size(); ++r) combine(tmp.data(), s_->in[r] + rank_ * n, n, op);
    }, out);
  }

  void all_gather(std::span<float> out, std::span<const float> in, const OpOptions& o) override {
    check_sizes("all_gather", out.size(), in.size(), in.size() * size());
    collective("all_gather", in.data(), in.size(), o, [&](std::vector<float>& tmp) {
      tmp.resize(out.size());
      for (int r = 0; r < size(); ++r) std::copy(s_->in[r], s_->in[r] + in.size(), tmp.begin() + r * in.size());
    }, out);
  }

  void broadcast(std::span<float> data, int root, const OpOptions& o) override {
    if (root < 0 || root >= size())
      throw std::invalid_argument(fmt::format("broadcast on group '{}': root {} out of range", name(), root));
    collective("broadcast", data.data(), data.size(), o, [&](std::vector<float>& tmp) {
      tmp.assign(s_->in[root], s_->in[root] + data.size());
    }, data);
  }

  void barrier(const OpOptions& o) override {
    collective("barrier", nullptr, 0, o, [](std::vector<float>&) {}, {});
  }

  // Every member posts its input and send counts (phase 1), each copies its blocks out of the
  // others' inputs, then all meet again (phase 2) before anyone reuses its input.
  using ProcessGroup::all_to_all_v;
  void all_to_all_v(void* out, std::span<const size_t> out_counts, const void* in, std::span<const size_t> in_counts,
                    DType dtype, const OpOptions& o) override {
    const char* op = "all_to_all_v";
    const std::vector<size_t> out_at = block_offsets(op, out_counts);
    block_offsets(op, in_counts);  // one count per member
    const size_t es = dtype_bytes(dtype);
    const auto deadline = Clock::now() + timeout_of(o);
    Lock lock(s_->m);
    fail_if_broken(lock, op, -1);
    s_->raw[rank_] = static_cast<const std::byte*>(in);
    s_->counts[rank_].assign(in_counts.begin(), in_counts.end());
    s_->out_counts[rank_].assign(out_counts.begin(), out_counts.end());
    s_->in_n[rank_] = es;
    s_->op[rank_] = op;
    meet(lock, op, deadline, o);
    for (int q = 0; q < size(); ++q)
      if (s_->op[q] != op || s_->in_n[q] != es)
        fail(lock, op, q, fmt::format("member {} called {} with {}-byte elements, this rank {} with {}", q, s_->op[q],
                                      s_->in_n[q], op, es));
    // Every member checks every pair, so all fail alike and none reads a failed one's input.
    for (int q = 0; q < size(); ++q)
      for (int r = 0; r < size(); ++r)
        if (s_->counts[q][r] != s_->out_counts[r][q])
          fail(lock, op, q == rank_ ? r : q, fmt::format("member {} sends {} elements to member {}, which expects {}",
                                                         q, s_->counts[q][r], r, s_->out_counts[r][q]));
    lock.unlock();
    // Phase 1 is done: the inputs and counts stay unchanged until phase 2.
    std::vector<std::byte> tmp(out_at.back() * es);
    for (int q = 0; q < size(); ++q) {
      size_t from = 0;
      for (int r = 0; r < rank_; ++r) from += s_->counts[q][r];
      std::copy_n(s_->raw[q] + from * es, out_counts[q] * es, tmp.data() + out_at[q] * es);
    }
    lock.lock();
    meet(lock, op, deadline, o);
    if (!tmp.empty()) std::memcpy(out, tmp.data(), tmp.size());
  }

  void send_recv(std::span<const P2POp> ops, const OpOptions& o) override {
    const char* op = p2p_name(ops);
    for (const auto& x : ops) check_peer(op, x.peer);
    const auto deadline = Clock::now() + timeout_of(o);
    // Rendezvous semantics as Gloo and NCCL: the sender's buffer is posted, the receiver
    // copies out of it, and the send completes only then.
    std::vector<detail::Letter> letters;
    letters.reserve(ops.size());
    Lock lock(s_->m);
    fail_if_broken(lock, op, -1);
    for (const auto& x : ops)
      if (x.kind == P2POp::kSend) {
        letters.push_back({x.data.data(), x.data.size(), false});
        s_->mail[{rank_, x.peer, x.tag}].push_back(&letters.back());
      }
    s_->cv.notify_all();
    try {
      for (const auto& x : ops)
        if (x.kind == P2POp::kRecv) take_letter(lock, op, x, deadline, o);
      if (o.on_received) {
        lock.unlock();
        o.on_received();
        lock.lock();
      }
      size_t i = 0;
      for (const auto& x : ops)
        if (x.kind == P2POp::kSend) wait_delivered(lock, op, x, letters[i++], deadline, o);
    } catch (...) {
      for (auto& [key, box] : s_->mail)  // withdraw what was not delivered: it dies with us
        std::erase_if(box, [&](detail::Letter* l) { return l >= letters.data() && l < letters.data() + letters.size(); });
      throw;
    }
  }

 private:
  static const char* p2p_name(std::span<const P2POp> ops) {
    if (ops.size() != 1) return "send_recv";
    return ops[0].kind == P2POp::kSend ? "send" : "recv";
  }

  void take_letter(Lock& lock, const char* op, const P2POp& x, Clock::time_point deadline, const OpOptions& o) {
    auto& box = s_->mail[{x.peer, rank_, x.tag}];
    while (box.empty()) {
      fail_if_broken(lock, op, x.peer);
      if (s_->left[x.peer]) fail(lock, op, x.peer, "the peer left the group before sending");
      if (s_->cv.wait_until(lock, deadline) == std::cv_status::timeout && box.empty())
        fail(lock, op, x.peer, fmt::format("timed out after {} ms waiting for a message with tag {}",
                                           timeout_of(o).count(), x.tag));
    }
    detail::Letter* l = box.front();
    if (l->n != x.data.size())
      fail(lock, op, x.peer, fmt::format("message with tag {} has {} elements, the receiver expects {}", x.tag, l->n,
                                         x.data.size()));
    std::copy(l->data, l->data + l->n, x.data.begin());
    l->delivered = true;
    box.pop_front();
    s_->cv.notify_all();
  }

  void wait_delivered(Lock& lock, const char* op, const P2POp& x, const detail::Letter& l, Clock::time_point deadline,
                      const OpOptions& o) {
    while (!l.delivered) {
      fail_if_broken(lock, op, x.peer);
      if (s_->left[x.peer]) fail(lock, op, x.peer, "the peer left the group before receiving");
      if (s_->cv.wait_until(lock, deadline) == std::cv_status::timeout && !l.delivered)
        fail(lock, op, x.peer, fmt::format("timed out after {} ms: the peer posted no matching recv for tag {}",
                                           timeout_of(o).count(), x.tag));
    }
  }

  static void combine(float* acc, const float* x, size_t n, ReduceOp op) {
    if (op == ReduceOp::kSum)
      for (size_t i = 0; i < n; ++i) acc[i] += x[i];
    else
      for (size_t i = 0; i < n; ++i) acc[i] = std::max(acc[i], x[i]);
  }

  template <class Compute>
  void collective(const char* op, const float* in, size_t n, const OpOptions& o, Compute compute,
                  std::span<float> out) {
    const auto deadline = Clock::now() + timeout_of(o);
    {
      Lock lock(s_->m);
      fail_if_broken(lock, op, -1);
      s_->in[rank_] = in;
      s_->in_n[rank_] = n;
      s_->op[rank_] = op;
      meet(lock, op, deadline, o);
      for (int r = 0; r < size(); ++r)
        if (s_->op[r] != op || s_->in_n[r] != n)
          fail(lock, op, r, fmt::format("member {} called {} with {} elements, this rank {} with {}", r, s_->op[r],
                                        s_->in_n[r], op, n));
    }
    // Phase 1 is done: every input stays unchanged until phase 2, so reading them without
    // the lock is safe; the result goes to a private buffer first.
    std::vector<float> tmp;
    compute(tmp);
    Lock lock(s_->m);
    meet(lock, op, deadline, o);
    std::copy(tmp.begin(), tmp.end(), out.begin());  // phase 2 done: nobody reads our input now
  }

  // One phase: wait until every member arrives, a member leaves, or the deadline.
  void meet(Lock& lock, const char* op, Clock::time_point deadline, const OpOptions& o) {
    const uint64_t my_round = s_->round;
    s_->present[rank_] = true;
    if (++s_->arrived == size()) {
      s_->arrived = 0;
      std::fill(s_->present.begin(), s_->present.end(), false);
      ++s_->round;
      s_->cv.notify_all();
      return;
    }
    for (;;) {
      if (s_->round != my_round) return;
      fail_if_broken(lock, op, -1);
      int gone = s_->first_left();
      if (gone >= 0) fail(lock, op, gone, "the peer left the group (closed or died) before joining");
      if (s_->cv.wait_until(lock, deadline) == std::cv_status::timeout && s_->round == my_round) {
        std::vector<int> missing;
        for (int r = 0; r < size(); ++r)
          if (!s_->present[r]) missing.push_back(r);
        fail(lock, op, missing.empty() ? -1 : missing.front(),
             fmt::format("timed out after {} ms; member(s) [{}] never arrived", timeout_of(o).count(),
                         fmt::join(missing, ",")));
      }
    }
  }

  void fail_if_broken(Lock& lock, const char* op, int peer) {
    // Blame the member the first failure blamed: in a real job every rank finds that out
    // on its own; here the shared state tells the others at once.
    if (!s_->broken.empty())
      throw CommError(where(op, s_->broken_peer >= 0 ? s_->broken_peer : peer),
                      "group is broken by an earlier failure: " + s_->broken);
  }

  [[noreturn]] void fail(Lock& lock, const char* op, int peer, const std::string& detail) {
    if (s_->broken.empty()) {
      s_->broken = fmt::format("{} at rank {}: {}", op, rank_, detail);
      s_->broken_peer = peer;
    }
    s_->cv.notify_all();
    throw CommError(where(op, peer), detail);
  }

  CommError::Where where(const char* op, int peer) const {
    return {op, name(), rank_, global_rank_of(rank_), peer, peer >= 0 ? global_rank_of(peer) : -1};
  }

  std::shared_ptr<detail::InProcState> s_;
};

}  // namespace

std::unique_ptr<ProcessGroup> make_inproc_group(const std::shared_ptr<InProcessHub>& hub, GroupSpec spec) {
  auto state = hub->state_for(spec);
  return std::make_unique<InProcGroup>(std::move(state), std::move(spec));
}

}  // namespace holmes::comm
