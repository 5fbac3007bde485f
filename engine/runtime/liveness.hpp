// Whether the other ranks of an elastic job are still there, known before a collective's
// time-out: each rank beats in the store and leaves a mark there when its process ends.
//
//   elastic/live/<rank> = "<incarnation> <unix ms>"  rewritten every beat (period below)
//                       = "<incarnation> closed"     written by a TCP store's server when the
//                                                    rank's connection ends unannounced
//
// A rank whose process died (killed, crashed) is known at once on a TCP store: the kernel
// closes its connection. A frozen one (stopped, swapped out, its node cut off) is known when its
// last beat is older than cluster.timeout_s, the same bound a collective waiting on it has: the
// waits through the store (the outer exchange's verdict) then end as soon as a collective would.
// Wall clocks are compared across nodes: their offset (NTP: milliseconds) is far inside the
// time-out. A rank that leaves on purpose withdraws its mark first.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "comm/store.hpp"

namespace holmes::runtime {

// "07:41:09.532 UTC": a wall-clock time in a log line, for a reader lining it up with a fault.
std::string wall_clock_text(std::chrono::system_clock::time_point t = std::chrono::system_clock::now());

// This rank's beat: a thread that rewrites elastic/live/<rank> every `period_s` from
// construction to destruction, and the store's mark at an unannounced close. Store failures
// end the beat silently (the store's own errors reach the training loop).
class Heartbeat {
 public:
  Heartbeat(std::shared_ptr<comm::Store> store, int rank, double period_s);
  ~Heartbeat();  // withdraws the close mark, stops beating and says it left (left_on_purpose)
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

 private:
  struct State;
  std::shared_ptr<State> state_;
  int rank_;
};

// The period of the beat for a job with cluster.timeout_s `timeout_s`: a tenth of it, at most 1 s.
double heartbeat_period_s(double timeout_s);

// Why `rank` is gone, or nothing while it beats (or never beat yet: nothing is known of it):
// "its process ended (its store connection closed)" or "its last heartbeat was 31.2 s ago
// (frozen or cut off)" when older than `stale_s`.
std::optional<std::string> rank_gone(comm::Store& store, int rank, double stale_s);

// Whether `rank` beats now: it has beaten, and its last beat is not older than `stale_s`.
bool beating(comm::Store& store, int rank, double stale_s);

// Whether the process whose beat is the rank's latest ended its Heartbeat on purpose (it left
// the job: dropped, or on its way out after a failure) though the beat is not old yet. A rank
// started again beats under another incarnation: false again.
bool left_on_purpose(comm::Store& store, int rank);

// GroupSpec::known_gone for a job whose ranks beat (rank_gone with `stale_s`; a store that does
// not answer knows nothing): a Gloo group that failed names a frozen or dead member at once
// instead of after the grace it gives the others' reports (up to 5 s).
std::function<std::optional<std::string>(int)> liveness_of(std::shared_ptr<comm::Store> store, double stale_s);

}  // namespace holmes::runtime
