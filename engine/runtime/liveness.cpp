#include "engine/runtime/liveness.hpp"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace holmes::runtime {

namespace {

std::string live_key(int rank) { return fmt::format("elastic/live/{}", rank); }
std::string left_key(int rank) { return fmt::format("elastic/left/{}", rank); }

int64_t unix_ms(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

// This process among the incarnations of its rank (a rank started again reuses the number).
std::string incarnation() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  return fmt::format("{}@{}", ::getpid(), host);
}

comm::Bytes text(const std::string& s) { return comm::Bytes(s.begin(), s.end()); }

}  // namespace

std::string wall_clock_text(std::chrono::system_clock::time_point t) {
  const int64_t ms = unix_ms(t) % 1000;
  return fmt::format("{:%H:%M:%S}.{:03d} UTC", fmt::gmtime(std::chrono::system_clock::to_time_t(t)), ms);
}

double heartbeat_period_s(double timeout_s) { return std::min(1.0, timeout_s / 10); }

struct Heartbeat::State {
  std::shared_ptr<comm::Store> store;
  std::string key, me;
  std::chrono::duration<double> period;
  std::mutex mutex;
  std::condition_variable wake;
  bool stop = false;
  std::atomic<bool> done{false};
};

Heartbeat::Heartbeat(std::shared_ptr<comm::Store> store, int rank, double period_s)
    : state_(std::make_shared<State>()), rank_(rank) {
  State& s = *state_;
  s.store = std::move(store);
  s.key = live_key(rank);
  s.me = incarnation();
  s.period = std::chrono::duration<double>(period_s);
  s.store->set(s.key, text(fmt::format("{} {}", s.me, unix_ms(std::chrono::system_clock::now()))));
  s.store->on_close(s.key, text(s.me + " closed"));
  // The thread owns a share of the state: a beat stuck on a store that stopped answering
  // outlives this object (it is detached below) without touching freed memory.
  std::thread([st = state_] {
    std::unique_lock<std::mutex> lock(st->mutex);
    while (!st->wake.wait_for(lock, st->period, [&] { return st->stop; })) {
      lock.unlock();
      try {
        st->store->set(st->key, text(fmt::format("{} {}", st->me, unix_ms(std::chrono::system_clock::now()))));
      } catch (const std::exception&) {
        lock.lock();
        break;
      }
      lock.lock();
    }
    st->done = true;
    st->wake.notify_all();
  }).detach();
}

Heartbeat::~Heartbeat() {
  State& s = *state_;
  {
    std::unique_lock<std::mutex> lock(s.mutex);
    s.stop = true;
    s.wake.notify_all();
    // A beat in flight ends within the store's request time-out; the process need not wait that long.
    s.wake.wait_for(lock, std::chrono::seconds(2), [&] { return s.done.load(); });
  }
  try {
    s.store->on_close("", {});  // leaving on purpose: no mark
    s.store->set(left_key(rank_), text(s.me));
  } catch (const std::exception&) {
  }
}

std::optional<std::string> rank_gone(comm::Store& store, int rank, double stale_s) {
  const std::string key = live_key(rank);
  if (!store.missing({key}).empty()) return std::nullopt;
  const comm::Bytes raw = store.get(key, comm::Millis(1000));
  const std::string value(raw.begin(), raw.end());
  const size_t space = value.rfind(' ');
  if (space == std::string::npos) return std::nullopt;
  const std::string tail = value.substr(space + 1);
  if (tail == "closed") return std::string("its process ended (its connection to the store closed)");
  char* end = nullptr;
  const long long at = std::strtoll(tail.c_str(), &end, 10);
  if (end == tail.c_str() || *end != '\0') return std::nullopt;
  const double age = (unix_ms(std::chrono::system_clock::now()) - at) / 1000.0;
  if (age <= stale_s) return std::nullopt;
  return fmt::format("its last heartbeat was {:.1f} s ago, at {} (frozen or cut off)", age,
                     wall_clock_text(std::chrono::system_clock::time_point(std::chrono::milliseconds(at))));
}

bool beating(comm::Store& store, int rank, double stale_s) {
  return store.missing({live_key(rank)}).empty() && !rank_gone(store, rank, stale_s);
}

bool left_on_purpose(comm::Store& store, int rank) {
  if (!store.missing({left_key(rank), live_key(rank)}).empty()) return false;
  const comm::Bytes left = store.get(left_key(rank), comm::Millis(1000));
  const comm::Bytes live = store.get(live_key(rank), comm::Millis(1000));
  const std::string me(left.begin(), left.end()), beat(live.begin(), live.end());
  return beat.rfind(me + " ", 0) == 0;  // the beat of the incarnation that left, not of a later one
}

std::function<std::optional<std::string>(int)> liveness_of(std::shared_ptr<comm::Store> store, double stale_s) {
  return [store = std::move(store), stale_s](int rank) -> std::optional<std::string> {
    try {
      return rank_gone(*store, rank, stale_s);
    } catch (const std::exception&) {
      return std::nullopt;
    }
  };
}

}  // namespace holmes::runtime
