// 1F1B step tables: per-stage invariants, a rendezvous simulator of all stages together
// (no deadlock, every send matched once, data dependencies in time), in-flight activations,
// and an independent timed check of the pipeline makespan. Every (stages, micro_batches)
// with 1 <= stages <= 16 and 1 <= micro_batches <= 64 is covered.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/schedule/schedule.hpp"
#include "engine/schedule/timing.hpp"

using namespace holmes::schedule;

namespace {

using Table = std::vector<std::vector<PipeStep>>;  // [stage][step]

constexpr int kMaxStages = 16;
constexpr int kMaxMicro = 64;

Table make_table(int stages, int m, PipeSchedule kind = PipeSchedule::k1f1b, int chunks = 1) {
  Table t;
  for (int s = 0; s < stages; ++s) t.push_back(schedule_steps(kind, stages, s, m, chunks));
  return t;
}

// Model chunks per stage: 1 + the largest chunk any step names.
int chunks_of(const Table& table) {
  int v = 1;
  for (const auto& steps : table)
    for (const PipeStep& st : steps) {
      v = std::max(v, st.chunk + 1);
      for (const PipeTransfer& t : st.transfers) v = std::max(v, t.chunk + 1);
    }
  return v;
}

// Index of a transfer's op among [kind][boundary][micro]: both ends of a transfer name the
// same boundary (link_chunk), so a send and its recv differ only in the kind.
int op_key(int s, const PipeTransfer& t, int chunks, int m) {
  return (static_cast<int>(t.kind) * chunks + link_chunk(s, t)) * m + t.micro;
}
int peer_key(int s, const PipeTransfer& t, int chunks, int m) {
  return (static_cast<int>(matching_kind(t.kind)) * chunks + link_chunk(s, t)) * m + t.micro;
}

std::string where(int s, size_t i) { return "stage " + std::to_string(s) + " step " + std::to_string(i) + ": "; }

// The neighbour a transfer of this kind must name.
int expected_peer(int s, P2PKind k) {
  return k == P2PKind::kSendActivation || k == P2PKind::kRecvGrad ? s + 1 : s - 1;
}

// One stage's list on its own: F and B of every micro once, in order, B(j) after F(j);
// rA(j) before F(j), sA(j) after it; rG(j) before B(j), sG(j) after it; each transfer to
// the right neighbour exactly once when that neighbour exists, never otherwise; in-flight
// activations within max_in_flight and reaching it. Returns "" or the first problem.
std::string check_stage(int stages, int s, int m, const std::vector<PipeStep>& steps,
                        PipeSchedule kind = PipeSchedule::k1f1b) {
  const bool split = kind == PipeSchedule::kZbH1;
  std::vector<int> fwd_at(m, -1), bwd_at(m, -1);
  int next_f = 0, next_b = 0, next_w = 0;
  std::vector<std::vector<int>> xfer_at(4, std::vector<int>(m, -1));  // [P2PKind][micro] -> step
  int in_flight = 0, peak = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    const PipeStep& st = steps[i];
    if (st.kind == PipeOpKind::kForward) {
      if (st.micro != next_f++) return where(s, i) + "forward out of order: F" + std::to_string(st.micro);
      fwd_at[st.micro] = static_cast<int>(i);
      peak = std::max(peak, ++in_flight);
    } else if (st.kind == PipeOpKind::kBackward) {
      if (st.micro != next_b++) return where(s, i) + "backward out of order: B" + std::to_string(st.micro);
      if (fwd_at[st.micro] < 0) return where(s, i) + "backward before its forward";
      bwd_at[st.micro] = static_cast<int>(i);
      if (!split) --in_flight;
    } else if (st.kind == PipeOpKind::kWeights) {
      if (!split) return where(s, i) + "a W pass in a table whose backward is not split";
      if (st.micro != next_w++) return where(s, i) + "W out of order: W" + std::to_string(st.micro);
      if (bwd_at[st.micro] < 0) return where(s, i) + "W before its B";
      if (!st.transfers.empty()) return where(s, i) + "W carries transfers";
      --in_flight;
    } else {
      if (st.transfers.empty() || st.transfers.size() > 2) return where(s, i) + "comm step with 0 or > 2 ops";
      if (st.micro != -1) return where(s, i) + "comm step carries a micro";
      for (const PipeTransfer& t : st.transfers) {
        if (t.micro < 0 || t.micro >= m) return where(s, i) + "transfer micro out of range";
        if (t.peer_stage != expected_peer(s, t.kind) || t.peer_stage < 0 || t.peer_stage >= stages)
          return where(s, i) + "transfer to a wrong or missing peer " + std::to_string(t.peer_stage);
        int& at = xfer_at[static_cast<int>(t.kind)][t.micro];
        if (at >= 0) return where(s, i) + "transfer repeated: " + to_string(st);
        at = static_cast<int>(i);
      }
    }
  }
  if (next_f != m || next_b != m || (split && next_w != m))
    return "stage " + std::to_string(s) + ": missing forwards, backwards or W passes";
  const bool prev = s > 0, next = s + 1 < stages;
  auto at = [&](P2PKind k, int j) { return xfer_at[static_cast<int>(k)][j]; };
  for (int j = 0; j < m; ++j) {
    const std::string mj = "stage " + std::to_string(s) + " micro " + std::to_string(j) + ": ";
    if (prev != (at(P2PKind::kRecvActivation, j) >= 0) || prev != (at(P2PKind::kSendGrad, j) >= 0) ||
        next != (at(P2PKind::kSendActivation, j) >= 0) || next != (at(P2PKind::kRecvGrad, j) >= 0))
      return mj + "transfers do not match the neighbours that exist";
    if (prev && !(at(P2PKind::kRecvActivation, j) < fwd_at[j] && bwd_at[j] < at(P2PKind::kSendGrad, j)))
      return mj + "rA must precede F and sG follow B";
    if (next && !(fwd_at[j] < at(P2PKind::kSendActivation, j) && at(P2PKind::kRecvGrad, j) < bwd_at[j]))
      return mj + "sA must follow F and rG precede B";
  }
  // 1F1B holds min(S - s, m) on stage s; ZB-H1 holds 1F1B's stage-0 figure on every stage.
  const int want = split ? std::min(stages, m) : std::min(stages - s, m);
  if (peak != want || peak != max_in_flight(kind, stages, s, m) || peak != max_in_flight(steps) ||
      (!split && peak != max_in_flight(stages, s, m)))
    return "stage " + std::to_string(s) + ": in-flight peak " + std::to_string(peak) + " vs max_in_flight " +
           std::to_string(max_in_flight(kind, stages, s, m));
  return "";
}

// Rendezvous simulation of all stages. A comm step posts all its ops at once; an op
// completes once the peer has posted the matching op (same micro, opposite side of the
// same direction, naming this stage); the stage moves past the step when all its ops
// completed. Forward and backward steps take t_fwd / t_bwd time units; communication is
// free. Every event gets a global sequence number, so "happens after" can be checked.
struct Posted {
  int count = 0;
  int peer = -1;
  long seq = 0;       // when posted
  double time = 0.0;  // stage clock when posted
};

struct SimResult {
  bool finished = false;
  std::string error;                  // first inconsistency found after the run
  std::vector<std::vector<long>> done;   // [stage][step] completion sequence number (0: never)
  std::vector<std::vector<Posted>> posted;  // [stage][kind * m + micro]
  double makespan = 0.0;
};

// Every posted send meets exactly one recv and the other way round; "" or the first problem.
std::string check_matching(const SimResult& r, int m, int chunks) {
  const int stages = static_cast<int>(r.posted.size());
  for (int s = 0; s < stages; ++s)
    for (int k = 0; k < 4; ++k)
      for (int link = 0; link < chunks; ++link)
        for (int j = 0; j < m; ++j) {
          const Posted& p = r.posted[s][(k * chunks + link) * m + j];
          if (p.count == 0) continue;
          if (p.peer < 0 || p.peer >= stages) return "stage " + std::to_string(s) + ": op toward missing stage";
          const int mk = static_cast<int>(matching_kind(static_cast<P2PKind>(k)));
          const Posted& q = r.posted[p.peer][(mk * chunks + link) * m + j];
          if (p.count != 1 || q.count != 1 || q.peer != s)
            return "stage " + std::to_string(s) + " kind " + std::to_string(k) + " boundary " + std::to_string(link) +
                   " micro " + std::to_string(j) + ": posted " + std::to_string(p.count) + " times, peer side " +
                   std::to_string(q.count);
        }
  return "";
}

// seed 0: round robin, one step per stage per sweep; otherwise stages in a random order
// each sweep, each advancing a random number of steps.
SimResult simulate(const Table& table, int m, unsigned seed = 0, double t_fwd = 1.0, double t_bwd = 1.0,
                   double t_w = 1.0) {
  const int stages = static_cast<int>(table.size());
  const int chunks = chunks_of(table);
  SimResult r;
  r.done.resize(stages);
  r.posted.assign(stages, std::vector<Posted>(4 * chunks * m));
  for (int s = 0; s < stages; ++s) r.done[s].assign(table[s].size(), 0);
  std::vector<size_t> pc(stages, 0);
  std::vector<bool> posted_current(stages, false);
  std::vector<double> clock(stages, 0.0);
  std::vector<int> order(stages);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937 rng(seed);
  long seq = 0;
  // Advances stage s by one step if it can; true on progress (posting counts as progress).
  auto advance = [&](int s) {
    if (pc[s] == table[s].size()) return false;
    const PipeStep& st = table[s][pc[s]];
    if (st.kind != PipeOpKind::kComm) {
      clock[s] += st.kind == PipeOpKind::kForward ? t_fwd : st.kind == PipeOpKind::kBackward ? t_bwd : t_w;
      r.done[s][pc[s]++] = ++seq;
      return true;
    }
    bool progress = false;
    if (!posted_current[s]) {
      ++seq;
      for (const PipeTransfer& t : st.transfers) {
        Posted& p = r.posted[s][op_key(s, t, chunks, m)];
        p = {p.count + 1, t.peer_stage, seq, clock[s]};
      }
      posted_current[s] = progress = true;
    }
    double ready = clock[s];
    for (const PipeTransfer& t : st.transfers) {
      if (t.peer_stage < 0 || t.peer_stage >= stages) return progress;
      const Posted& other = r.posted[t.peer_stage][peer_key(s, t, chunks, m)];
      if (other.count == 0 || other.peer != s) return progress;
      ready = std::max(ready, other.time);
    }
    clock[s] = ready;
    r.done[s][pc[s]++] = ++seq;
    posted_current[s] = false;
    return true;
  };
  for (bool progress = true; progress;) {
    progress = false;
    if (seed != 0) std::shuffle(order.begin(), order.end(), rng);
    for (int s : order) {
      const int moves = seed == 0 ? 1 : 1 + static_cast<int>(rng() % 3);
      for (int k = 0; k < moves; ++k) progress = advance(s) || progress;
    }
  }
  r.finished = true;
  for (int s = 0; s < stages; ++s) r.finished = r.finished && pc[s] == table[s].size();
  r.makespan = *std::max_element(clock.begin(), clock.end());
  r.error = check_matching(r, m, chunks);
  return r;
}

// Step index on `s` of the compute step (kind, j) or of the comm step holding transfer (k, j)
// (of model chunk c).
size_t find_compute(const std::vector<PipeStep>& steps, PipeOpKind kind, int j, int c = 0) {
  for (size_t i = 0; i < steps.size(); ++i)
    if (steps[i].kind == kind && steps[i].micro == j && steps[i].chunk == c) return i;
  throw std::logic_error("compute step not found");
}
size_t find_comm(const std::vector<PipeStep>& steps, P2PKind k, int j, int c = 0) {
  for (size_t i = 0; i < steps.size(); ++i)
    for (const PipeTransfer& t : steps[i].transfers)
      if (t.kind == k && t.micro == j && t.chunk == c) return i;
  throw std::logic_error("transfer not found");
}

// Data dependencies in simulated time, along the virtual pipeline (virtual stage v = chunk *
// stages + stage; without chunks, the stages): F(j) on v > 0 completes after the recv of
// A(j), which completes after v-1's stage posted A(j), which it did after its own F(j);
// gradients the same way from v+1 to v.
std::string check_dependencies(const Table& table, int m, const SimResult& r) {
  const int stages = static_cast<int>(table.size());
  const int chunks = chunks_of(table), last = stages * chunks - 1;
  auto seq_posted = [&](int s, P2PKind k, int j, int c) {
    const PipeStep& st = table[s][find_comm(table[s], k, j, c)];
    for (const PipeTransfer& t : st.transfers)
      if (t.kind == k && t.micro == j && t.chunk == c) return r.posted[s][op_key(s, t, chunks, m)].seq;
    return 0L;
  };
  for (int v = 0; v <= last; ++v)
    for (int j = 0; j < m; ++j) {
      const int s = v % stages, c = v / stages;
      const std::string mj = "virtual stage " + std::to_string(v) + " micro " + std::to_string(j) + ": ";
      const long f = r.done[s][find_compute(table[s], PipeOpKind::kForward, j, c)];
      const long b = r.done[s][find_compute(table[s], PipeOpKind::kBackward, j, c)];
      if (b <= f) return mj + "backward completed before forward";
      if (v > 0) {
        const int ps = (v - 1) % stages, pc = (v - 1) / stages;
        const long recv = r.done[s][find_comm(table[s], P2PKind::kRecvActivation, j, c)];
        const long sent = seq_posted(ps, P2PKind::kSendActivation, j, pc);
        const long prev_f = r.done[ps][find_compute(table[ps], PipeOpKind::kForward, j, pc)];
        if (!(prev_f < sent && sent < recv && recv < f)) return mj + "forward ran before its activation arrived";
      }
      if (v < last) {
        const int ns = (v + 1) % stages, nc = (v + 1) / stages;
        const long recv = r.done[s][find_comm(table[s], P2PKind::kRecvGrad, j, c)];
        const long sent = seq_posted(ns, P2PKind::kSendGrad, j, nc);
        const long next_b = r.done[ns][find_compute(table[ns], PipeOpKind::kBackward, j, nc)];
        if (!(next_b < sent && sent < recv && recv < b)) return mj + "backward ran before its gradient arrived";
      }
    }
  return "";
}

// The naive schedule: every batch split into single ops posted one after another.
Table split_batches(const Table& table) {
  Table out(table.size());
  for (size_t s = 0; s < table.size(); ++s)
    for (const PipeStep& st : table[s]) {
      if (st.kind != PipeOpKind::kComm) {
        out[s].push_back(st);
        continue;
      }
      for (const PipeTransfer& t : st.transfers) out[s].push_back({PipeOpKind::kComm, -1, {t}});
    }
  return out;
}

// The runner's timing (pipeline_stage.hpp) of `table`, one of make_table's, with every stage's
// passes and every hop alike: schedule::pipeline_makespan (engine/schedule/timing.hpp,
// which the planner prices the pipeline's loop with; the tests below pin it to closed forms).
double async_makespan(const Table& table, int m, double t_fwd, double t_bwd, double t_w, double latency = 0) {
  const int stages = static_cast<int>(table.size()), chunks = chunks_of(table);
  bool weights = false;
  for (const auto& steps : table)
    for (const PipeStep& st : steps) weights = weights || st.kind == PipeOpKind::kWeights;
  const PipeSchedule kind = chunks > 1 ? PipeSchedule::kInterleaved : weights ? PipeSchedule::kZbH1 : PipeSchedule::k1f1b;
  REQUIRE(table == make_table(stages, m, kind, chunks));
  const std::vector<PassTimes> passes(stages, PassTimes{t_fwd, t_bwd, t_w});
  const std::vector<HopTimes> hops(stages * chunks - 1, HopTimes{latency, latency});
  return pipeline_makespan(kind, stages, m, chunks, passes, hops);
}

}  // namespace

TEST_CASE("1F1B: every stage's list is well formed for all stages <= 16, micro-batches <= 64", "[train][schedule]") {
  for (int stages = 1; stages <= kMaxStages; ++stages)
    for (int m = 1; m <= kMaxMicro; ++m)
      for (int s = 0; s < stages; ++s) {
        INFO("stages " << stages << " micro_batches " << m);
        REQUIRE(check_stage(stages, s, m, one_f_one_b(stages, s, m)) == "");
        REQUIRE(max_in_flight(stages, s, m) <= stages - s);
      }
}

TEST_CASE("1F1B: all stages together finish under rendezvous semantics, dependencies hold", "[train][schedule]") {
  for (int stages = 1; stages <= kMaxStages; ++stages)
    for (int m = 1; m <= kMaxMicro; ++m) {
      INFO("stages " << stages << " micro_batches " << m);
      const Table table = make_table(stages, m);
      const SimResult r = simulate(table, m);
      REQUIRE(r.finished);
      REQUIRE(r.error == "");
      REQUIRE(check_dependencies(table, m, r) == "");
    }
}

TEST_CASE("1F1B: no deadlock in random interleavings of the stages either", "[train][schedule]") {
  unsigned seed = 1;
  for (int stages : {2, 3, 5, 8, 16})
    for (int m : {1, 2, 3, 7, 16, 33})
      for (int trial = 0; trial < 4; ++trial) {
        INFO("stages " << stages << " micro_batches " << m << " seed " << seed);
        const Table table = make_table(stages, m);
        const SimResult r = simulate(table, m, seed++);
        REQUIRE(r.finished);
        REQUIRE(r.error == "");
        REQUIRE(check_dependencies(table, m, r) == "");
      }
}

TEST_CASE("1F1B: posting send and recv one at a time deadlocks (the simulator catches it)", "[train][schedule]") {
  // Two neighbours in the steady phase both send first: stage S-2 sends A(1) while S-1
  // sends G(0), each waiting for a recv the other posts only afterwards.
  for (int stages = 2; stages <= kMaxStages; ++stages)
    for (int m = 2; m <= kMaxMicro; m += 7) {
      INFO("stages " << stages << " micro_batches " << m);
      const Table naive = split_batches(make_table(stages, m));
      CHECK_FALSE(simulate(naive, m).finished);
    }
  // With one micro-batch there is no steady phase to collide in.
  CHECK(simulate(split_batches(make_table(4, 1)), 1).finished);
}

TEST_CASE("1F1B: the pipeline takes (m + S - 1) * (t_fwd + t_bwd) with free communication", "[train][schedule]") {
  // Independent of how the table is built: the 1F1B bubble equals GPipe's, (S - 1) stage
  // slots of forward plus backward (Narayanan et al., 2021), whatever m is.
  for (int stages = 1; stages <= kMaxStages; ++stages)
    for (int m = 1; m <= kMaxMicro; ++m)
      for (auto [tf, tb] : {std::pair{1.0, 1.0}, std::pair{1.0, 2.0}}) {
        INFO("stages " << stages << " micro_batches " << m << " t_fwd " << tf << " t_bwd " << tb);
        const SimResult r = simulate(make_table(stages, m), m, 0, tf, tb);
        REQUIRE(r.finished);
        CHECK(r.makespan == Approx((m + stages - 1) * (tf + tb)));
      }
}

TEST_CASE("1F1B: the table for 2 stages and 3 micro-batches, derived by hand", "[train][schedule]") {
  CHECK(format_schedule(2, 3) ==
        "stage 0: F0 sA0 F1 [sA1 rG0] B0 F2 [sA2 rG1] B1 rG2 B2\n"
        "stage 1: rA0 F0 B0 [sG0 rA1] F1 B1 [sG1 rA2] F2 B2 sG2\n");
  CHECK(format_schedule(1, 2) == "stage 0: F0 B0 F1 B1\n");
}

TEST_CASE("1F1B: with fewer micro-batches than stages the first stages do all forwards first", "[train][schedule]") {
  // S = 6, m = 2: stages 0..3 have warm-up >= 2, so F0 F1 then B0 B1; in flight = m.
  for (int s = 0; s < 4; ++s) {
    std::vector<std::string> compute;
    for (const PipeStep& st : one_f_one_b(6, s, 2))
      if (st.kind != PipeOpKind::kComm) compute.push_back(to_string(st));
    CHECK(compute == std::vector<std::string>{"F0", "F1", "B0", "B1"});
    CHECK(max_in_flight(6, s, 2) == 2);
  }
  CHECK(max_in_flight(6, 5, 2) == 1);
}

TEST_CASE("1F1B: bad arguments throw std::invalid_argument", "[train][schedule]") {
  CHECK_THROWS_AS(one_f_one_b(0, 0, 4), std::invalid_argument);
  CHECK_THROWS_AS(one_f_one_b(4, 4, 4), std::invalid_argument);
  CHECK_THROWS_AS(one_f_one_b(4, -1, 4), std::invalid_argument);
  CHECK_THROWS_AS(one_f_one_b(4, 0, 0), std::invalid_argument);
  CHECK_THROWS_AS(max_in_flight(2, 2, 1), std::invalid_argument);
  CHECK_THROWS_AS(format_schedule(0, 1), std::invalid_argument);
  CHECK_THROWS_AS(p2p_tag(P2PKind::kSendGrad, -1), std::invalid_argument);
  CHECK_THROWS_WITH(one_f_one_b(3, 5, 4), Catch::Contains("stage must be in [0, 3), got 5"));
}

TEST_CASE("p2p tags: both sides agree, directions and micro-batches never collide", "[train][schedule]") {
  std::set<uint32_t> seen;
  for (int j : {0, 1, 2, 63, 64, 99'999, 100'000, kMaxTaggedMicro}) {
    CHECK(p2p_tag(P2PKind::kSendActivation, j) == p2p_tag(P2PKind::kRecvActivation, j));
    CHECK(p2p_tag(P2PKind::kSendGrad, j) == p2p_tag(P2PKind::kRecvGrad, j));
    CHECK(seen.insert(p2p_tag(P2PKind::kSendActivation, j)).second);
    CHECK(seen.insert(p2p_tag(P2PKind::kSendGrad, j)).second);
  }
  for (int j = 0; j <= 100'000; ++j) {
    seen.insert(p2p_tag(P2PKind::kRecvActivation, j));
    seen.insert(p2p_tag(P2PKind::kRecvGrad, j));
  }
  CHECK(seen.size() == 2 * 100'001 + 2);  // the 2 extra: kMaxTaggedMicro's pair
  for (P2PKind k : {P2PKind::kSendActivation, P2PKind::kRecvActivation, P2PKind::kSendGrad, P2PKind::kRecvGrad}) {
    CHECK(matching_kind(matching_kind(k)) == k);
    CHECK(is_send(k) != is_send(matching_kind(k)));
  }
}

TEST_CASE("ZB-H1: every stage's list is well formed, each stage holds min(stages, m)", "[train][schedule]") {
  for (int stages = 1; stages <= kMaxStages; ++stages)
    for (int m = 1; m <= kMaxMicro; ++m)
      for (int s = 0; s < stages; ++s) {
        INFO("stages " << stages << " micro_batches " << m << " stage " << s);
        REQUIRE(check_stage(stages, s, m, zero_bubble_h1(stages, s, m), PipeSchedule::kZbH1) == "");
      }
}

TEST_CASE("ZB-H1: the comm steps and the F/B order are 1F1B's (its deadlock argument holds)", "[train][schedule]") {
  for (int stages = 1; stages <= kMaxStages; ++stages)
    for (int m = 1; m <= kMaxMicro; m += 3)
      for (int s = 0; s < stages; ++s) {
        std::vector<PipeStep> zb = zero_bubble_h1(stages, s, m);
        zb.erase(std::remove_if(zb.begin(), zb.end(), [](const PipeStep& st) { return st.kind == PipeOpKind::kWeights; }),
                 zb.end());
        REQUIRE(zb == one_f_one_b(stages, s, m));
      }
}

TEST_CASE("ZB-H1: all stages finish under rendezvous semantics, in order and at random", "[train][schedule]") {
  unsigned seed = 1;
  for (int stages = 1; stages <= kMaxStages; ++stages)
    for (int m = 1; m <= kMaxMicro; m += (stages > 8 ? 5 : 1)) {
      INFO("stages " << stages << " micro_batches " << m);
      const Table table = make_table(stages, m, PipeSchedule::kZbH1);
      for (unsigned sd : {0u, seed++}) {
        const SimResult r = simulate(table, m, sd);
        REQUIRE(r.finished);
        REQUIRE(r.error == "");
        REQUIRE(check_dependencies(table, m, r) == "");
      }
    }
}

TEST_CASE("Asynchronous posts: 1F1B takes (m + S - 1)(F + B), ZB-H1 the paper's m(F + B + W) + (S - 1)(F + B - W)",
          "[train][schedule]") {
  // t_F = t_B = t_W = 1 (a backward of 2 for 1F1B); ZB-H1's bubble (Qi et al. 2023, section 3)
  // holds once m >= S; with fewer micro-batches it is still never slower than 1F1B.
  for (int stages = 1; stages <= 8; ++stages)
    for (int m = 1; m <= 24; ++m) {
      INFO("stages " << stages << " micro_batches " << m);
      const double f1b = async_makespan(make_table(stages, m), m, 1, 2, 0);
      const double zb = async_makespan(make_table(stages, m, PipeSchedule::kZbH1), m, 1, 1, 1);
      CHECK(f1b == Approx((m + stages - 1) * 3.0));
      if (m >= stages) CHECK(zb == Approx(3.0 * m + stages - 1));
      CHECK(zb <= f1b);
      if (stages > 1) CHECK(zb < f1b);
    }
}

TEST_CASE("Asynchronous posts: ZB-H1's W passes cover slow pipeline sends that 1F1B waits for", "[train][schedule]") {
  // A transfer latency of one forward (a cross-island send as slow as the compute).
  for (auto [stages, m] : {std::pair{2, 8}, std::pair{4, 8}, std::pair{4, 16}, std::pair{8, 16}}) {
    INFO("stages " << stages << " micro_batches " << m);
    const double f1b = async_makespan(make_table(stages, m), m, 1, 2, 0, 1.0);
    const double zb = async_makespan(make_table(stages, m, PipeSchedule::kZbH1), m, 1, 1, 1, 1.0);
    CHECK(std::isfinite(zb));
    CHECK(zb <= f1b - (stages - 1));  // at least the free-link saving, S - 1 forwards' time
  }
}

TEST_CASE("ZB-H1: the table for 2 stages and 3 micro-batches, derived by hand", "[train][schedule]") {
  // Stage 0 holds no W back (lag 0): W(i) right after iteration i, W2 in its cool-down. Stage
  // 1 holds one (lag 1): W0 after iteration 1's post, W1 after iteration 2's, W2 at the end.
  CHECK(format_schedule(2, 3, PipeSchedule::kZbH1) ==
        "stage 0: F0 sA0 F1 [sA1 rG0] B0 W0 F2 [sA2 rG1] B1 W1 rG2 B2 W2\n"
        "stage 1: rA0 F0 B0 [sG0 rA1] F1 B1 [sG1 rA2] W0 F2 B2 sG2 W1 W2\n");
  CHECK(format_schedule(1, 2, PipeSchedule::kZbH1) == "stage 0: F0 B0 W0 F1 B1 W1\n");
  CHECK(max_in_flight(PipeSchedule::kZbH1, 2, 0, 3) == 2);
  CHECK(max_in_flight(PipeSchedule::kZbH1, 2, 1, 3) == 2);
  CHECK(std::string(pipe_schedule_name(PipeSchedule::kZbH1)) == "zb-h1");
}

TEST_CASE("ZB-H1: the first stage joins each B but the last with its W, no later stage any (joins_weights)",
          "[train][schedule]") {
  // Stage 0 holds no W back, so a stage runs its B and W as one pass, all but the last
  // micro-batch's; a later stage posts its B's gradient before any W.
  for (int stages = 1; stages <= kMaxStages; ++stages)
    for (int m = 1; m <= kMaxMicro; m += 3)
      for (int s = 0; s < stages; ++s) {
        INFO("stages " << stages << " micro_batches " << m << " stage " << s);
        const std::vector<PipeStep> zb = zero_bubble_h1(stages, s, m), f1b = one_f_one_b(stages, s, m);
        int joined = 0;
        for (size_t i = 0; i < zb.size(); ++i) {
          if (!joins_weights(zb, i, m)) continue;
          ++joined;
          REQUIRE(zb[i + 1].kind == PipeOpKind::kWeights);
          REQUIRE(zb[i + 1].micro == zb[i].micro);
        }
        CHECK(joined == (s == 0 ? m - 1 : 0));
        for (size_t i = 0; i < f1b.size(); ++i) CHECK_FALSE(joins_weights(f1b, i, m));
      }
  const std::vector<PipeStep> hand = {{PipeOpKind::kBackward, 0, {}}, {PipeOpKind::kWeights, 1, {}},
                                      {PipeOpKind::kBackward, 1, {}}, {PipeOpKind::kWeights, 1, {}},
                                      {PipeOpKind::kBackward, 1, {}}, {PipeOpKind::kWeights, 1, {}, 1}};
  CHECK_FALSE(joins_weights(hand, 4, 3));  // another chunk's W
  CHECK(joins_weights(hand, 2, 3));
  CHECK_FALSE(joins_weights(hand, 2, 2));  // the last micro-batch's
  CHECK_FALSE(joins_weights(hand, 0, 3));  // another micro-batch's W
  CHECK_FALSE(joins_weights(hand, 3, 3));  // not a B
}

namespace {

// Interleaved 1F1B on `s` of `stages` with `chunks` chunks, independent of how the table is
// built: F and B of every (chunk, micro) once, each chunk's forwards and backwards in
// micro-batch order, B after F; rA before F and sG after B exactly where the virtual stage
// has a predecessor, sA after F and rG before B where it has a successor, each toward the
// stage that holds that virtual neighbour; at most 4 ops per comm step. Returns "" or the
// first problem; `peak` gets the most chunk-micro-batches held at once.
std::string check_interleaved_stage(int stages, int s, int m, int chunks, const std::vector<PipeStep>& steps,
                                    int& peak) {
  const int last = stages * chunks - 1;
  auto idx = [&](int c, int j) { return c * m + j; };
  std::vector<int> fwd_at(chunks * m, -1), bwd_at(chunks * m, -1), next_f(chunks, 0), next_b(chunks, 0);
  std::vector<std::vector<int>> xfer_at(4, std::vector<int>(chunks * m, -1));
  int in_flight = 0;
  peak = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    const PipeStep& st = steps[i];
    if (st.kind == PipeOpKind::kWeights) return where(s, i) + "a W pass in the interleaved schedule";
    if (st.kind != PipeOpKind::kComm) {
      if (st.chunk < 0 || st.chunk >= chunks || st.micro < 0 || st.micro >= m) return where(s, i) + "bad step";
      const bool f = st.kind == PipeOpKind::kForward;
      if (st.micro != (f ? next_f : next_b)[st.chunk]++) return where(s, i) + "out of micro-batch order";
      if (!f && fwd_at[idx(st.chunk, st.micro)] < 0) return where(s, i) + "backward before its forward";
      (f ? fwd_at : bwd_at)[idx(st.chunk, st.micro)] = static_cast<int>(i);
      in_flight += f ? 1 : -1;
      peak = std::max(peak, in_flight);
      continue;
    }
    if (st.transfers.empty() || st.transfers.size() > 4) return where(s, i) + "comm step with 0 or > 4 ops";
    for (const PipeTransfer& t : st.transfers) {
      if (t.micro < 0 || t.micro >= m || t.chunk < 0 || t.chunk >= chunks) return where(s, i) + "transfer out of range";
      const bool next = t.kind == P2PKind::kSendActivation || t.kind == P2PKind::kRecvGrad;
      if (t.peer_stage != (next ? (s + 1) % stages : (s + stages - 1) % stages))
        return where(s, i) + "transfer to a wrong peer " + std::to_string(t.peer_stage);
      int& at = xfer_at[static_cast<int>(t.kind)][idx(t.chunk, t.micro)];
      if (at >= 0) return where(s, i) + "transfer repeated: " + to_string(st);
      at = static_cast<int>(i);
    }
  }
  for (int c = 0; c < chunks; ++c) {
    if (next_f[c] != m || next_b[c] != m) return "stage " + std::to_string(s) + ": missing forwards or backwards";
    const int v = virtual_stage(stages, s, c);
    for (int j = 0; j < m; ++j) {
      auto at = [&](P2PKind k) { return xfer_at[static_cast<int>(k)][idx(c, j)]; };
      const int f = fwd_at[idx(c, j)], b = bwd_at[idx(c, j)];
      const std::string cj = "stage " + std::to_string(s) + " chunk " + std::to_string(c) + " micro " + std::to_string(j);
      if ((v > 0) != (at(P2PKind::kRecvActivation) >= 0) || (v > 0) != (at(P2PKind::kSendGrad) >= 0) ||
          (v < last) != (at(P2PKind::kSendActivation) >= 0) || (v < last) != (at(P2PKind::kRecvGrad) >= 0))
        return cj + ": transfers do not match the virtual neighbours";
      if (v > 0 && !(at(P2PKind::kRecvActivation) < f && b < at(P2PKind::kSendGrad)))
        return cj + ": rA must precede F and sG follow B";
      if (v < last && !(f < at(P2PKind::kSendActivation) && at(P2PKind::kRecvGrad) < b))
        return cj + ": sA must follow F and rG precede B";
    }
  }
  return "";
}

}  // namespace

TEST_CASE("Interleaved: every stage's list is well formed and stage 0 holds Megatron's p + (p - 1) / V",
          "[train][schedule]") {
  for (int stages = 2; stages <= 8; ++stages)
    for (int chunks = 2; chunks <= 4; ++chunks)
      for (int m = stages; m <= 32; m += stages)
        for (int s = 0; s < stages; ++s) {
          INFO("stages " << stages << " chunks " << chunks << " micro_batches " << m << " stage " << s);
          const auto steps = interleaved_1f1b(stages, s, m, chunks);
          int peak = 0;
          REQUIRE(check_interleaved_stage(stages, s, m, chunks, steps, peak) == "");
          REQUIRE(peak == max_in_flight(steps));
          REQUIRE(peak == max_in_flight(PipeSchedule::kInterleaved, stages, s, m, chunks));
          int per_chunk = 0;
          for (int c = 0; c < chunks; ++c) per_chunk += max_in_flight(steps, c);
          REQUIRE(per_chunk >= peak);
          // Narayanan et al. 2021: the first stage keeps p (1 + (p - 1) / (p V)) micro-batches'
          // activations, p V + p - 1 chunk-micro-batches of 1/V of them; later stages fewer.
          const int megatron = stages * chunks + stages - 1;
          if (s == 0) REQUIRE(peak == std::min(megatron, m * chunks));
          REQUIRE(peak <= megatron);
        }
}

TEST_CASE("Interleaved: all stages finish under rendezvous semantics, in order and at random", "[train][schedule]") {
  unsigned seed = 1;
  for (int stages = 2; stages <= 8; ++stages)
    for (int chunks = 2; chunks <= 4; ++chunks)
      for (int m = stages; m <= 4 * stages; m += stages) {
        INFO("stages " << stages << " chunks " << chunks << " micro_batches " << m);
        const Table table = make_table(stages, m, PipeSchedule::kInterleaved, chunks);
        for (unsigned sd : {0u, seed++, seed++}) {
          INFO("seed " << sd);
          const SimResult r = simulate(table, m, sd);
          REQUIRE(r.finished);
          REQUIRE(r.error == "");
          REQUIRE(check_dependencies(table, m, r) == "");
        }
      }
}

TEST_CASE("Interleaved: posting its batches one op at a time deadlocks (the batching matters)", "[train][schedule]") {
  for (int stages = 2; stages <= 6; ++stages)
    for (int chunks = 2; chunks <= 3; ++chunks) {
      INFO("stages " << stages << " chunks " << chunks);
      CHECK_FALSE(simulate(split_batches(make_table(stages, 2 * stages, PipeSchedule::kInterleaved, chunks)),
                           2 * stages).finished);
    }
}

TEST_CASE("Asynchronous posts: interleaving V chunks divides 1F1B's bubble by V for equal work per stage",
          "[train][schedule]") {
  // A stage's work per micro-batch is the same in both (1F1B: F = 1, B = 2; interleaved: each
  // of V chunks F = 1/V, B = 2/V), so 1F1B takes m * 3 + (S - 1) * 3 and interleaved
  // m * 3 + (S - 1) * 3 / V (Narayanan et al. 2021, section 2.2.2).
  for (int stages = 2; stages <= 6; ++stages)
    for (int chunks = 2; chunks <= 4; ++chunks)
      for (int m = stages; m <= 4 * stages; m += stages) {
        INFO("stages " << stages << " chunks " << chunks << " micro_batches " << m);
        const double v = chunks;
        const double f1b = async_makespan(make_table(stages, m), m, 1, 2, 0);
        const double il = async_makespan(make_table(stages, m, PipeSchedule::kInterleaved, chunks), m, 1 / v, 2 / v, 0);
        CHECK(f1b == Approx(3.0 * m + 3.0 * (stages - 1)));
        CHECK(il == Approx(3.0 * m + 3.0 * (stages - 1) / v));
        CHECK(il - 3.0 * m == Approx((f1b - 3.0 * m) / v));
      }
}

TEST_CASE("Interleaved: the table for 2 stages, 2 chunks and 2 micro-batches, derived by hand", "[train][schedule]") {
  // Virtual stages 0 (stage 0 chunk 0), 1 (stage 1 chunk 0), 2 (stage 0 chunk 1), 3 (stage 1
  // chunk 1). Forwards in the order (chunk.micro) 0.0 0.1 1.0 1.1, backwards 1.0 1.1 0.0 0.1.
  // Stage 0 warms up with all 4 forwards (2 * 1 + 1 * 2, no steady phase), so the first
  // gradient is received alone; stage 1 (the last virtual stage's holder) warms up with 2,
  // receives no gradient for chunk 1 and sends no activation from it.
  CHECK(format_schedule(2, 2, PipeSchedule::kInterleaved, 2) ==
        "stage 0: F0 sA0 F1 [sA1 rA0.1] F0.1 [sA0.1 rA1.1] F1.1 sA1.1 rG0.1 B0.1 [sG0.1 rG1.1] B1.1 "
        "[sG1.1 rG0] B0 rG1 B1\n"
        "stage 1: rA0 F0 [sA0 rA1] F1 [sA1 rA0.1] F0.1 B0.1 [sG0.1 rA1.1] F1.1 B1.1 [sG1.1 rG0] B0 "
        "[sG0 rG1] B1 sG1\n");
}

TEST_CASE("Interleaved: bad arguments throw and tags tell the boundaries apart", "[train][schedule]") {
  CHECK_THROWS_WITH(interleaved_1f1b(2, 0, 3, 2), Catch::Contains("micro_batches a multiple of stages"));
  CHECK_THROWS_AS(interleaved_1f1b(2, 0, 4, 1), std::invalid_argument);
  CHECK_THROWS_AS(interleaved_1f1b(1, 0, 4, 2), std::invalid_argument);
  CHECK_THROWS_AS(interleaved_1f1b(2, 2, 4, 2), std::invalid_argument);
  CHECK_THROWS_AS(p2p_tag(P2PKind::kSendGrad, 0, kMaxTaggedChunk + 1), std::invalid_argument);
  CHECK(std::string(pipe_schedule_name(PipeSchedule::kInterleaved)) == "interleaved");
  // The wrap-around: stage 0's chunk 1 receives what stage S-1's chunk 0 sent (boundary 0),
  // and its gradient goes back over the same boundary.
  const PipeTransfer recv{P2PKind::kRecvActivation, 3, 3, 1}, send{P2PKind::kSendActivation, 3, 0, 0};
  CHECK(link_chunk(0, recv) == 0);
  CHECK(p2p_tag(0, recv) == p2p_tag(3, send));
  CHECK(link_chunk(2, PipeTransfer{P2PKind::kRecvActivation, 3, 1, 1}) == 1);
  std::set<uint32_t> seen;
  for (int link = 0; link <= kMaxTaggedChunk; ++link)
    for (int j : {0, 1, kMaxTaggedMicro})
      for (P2PKind k : {P2PKind::kSendActivation, P2PKind::kSendGrad}) {
        const uint32_t tag = p2p_tag(k, j, link);
        CHECK(tag < 0x40000000u);
        CHECK(seen.insert(tag).second);
      }
}

TEST_CASE("pipeline_makespan: hops and stages of their own", "[train][schedule]") {
  // One slow hop costs more than the same time spread over every hop, a slower stage sets the
  // pace, and the sizes must match the stages.
  std::vector<PassTimes> passes(4, PassTimes{1, 2, 0});
  std::vector<HopTimes> one(3, HopTimes{0, 0}), spread(3, HopTimes{0.5, 0.5});
  one[1] = {1.5, 1.5};
  CHECK(pipeline_makespan(PipeSchedule::k1f1b, 4, 16, 1, passes, one) >
        pipeline_makespan(PipeSchedule::k1f1b, 4, 16, 1, passes, spread));
  passes[2] = {1.5, 3, 0};
  const double paced = pipeline_makespan(PipeSchedule::k1f1b, 4, 16, 1, passes, std::vector<HopTimes>(3));
  CHECK(paced >= 16 * 4.5);
  CHECK(paced < 16 * 4.5 + 3 * 4.5);  // the fill and drain pass the faster stages
  CHECK_THROWS_AS(pipeline_makespan(PipeSchedule::k1f1b, 4, 16, 1, passes, std::vector<HopTimes>(2)),
                  std::invalid_argument);
}

TEST_CASE("pipeline_makespan: a message's own delay, and the mean over drawn delays", "[train][schedule]") {
  std::vector<PassTimes> passes(4, PassTimes{1, 2, 0});
  const std::vector<HopTimes> hops(3, HopTimes{0.1, 0.1});
  const double base = pipeline_makespan(PipeSchedule::k1f1b, 4, 16, 1, passes, hops);
  // The first activation over the first boundary lies on every path of the fill: a delay there
  // moves the whole step; no delay is the same as none given.
  const MessageDelay first = [](int d, int b, int i) { return d == 0 && b == 0 && i == 0 ? 5.0 : 0.0; };
  CHECK(pipeline_makespan(PipeSchedule::k1f1b, 4, 16, 1, passes, hops, first) == Approx(base + 5));
  CHECK(pipeline_makespan(PipeSchedule::k1f1b, 4, 16, 1, passes, hops, [](int, int, int) { return 0.0; }) == base);
  // Each message asked once: 2 directions x 3 boundaries x 16 micro-batches.
  int asked = 0;
  pipeline_makespan(PipeSchedule::k1f1b, 4, 16, 1, passes, hops, [&](int, int, int) { return ++asked, 0.0; });
  CHECK(asked == 2 * 3 * 16);
  // Drawn delays of mean 1: above the step at every message's mean (the step waits for the
  // latest of its paths), below every message at a long tail; the same draws at every call.
  const std::vector<double> mean(3, 1.0);
  const double expected = expected_pipeline_makespan(PipeSchedule::k1f1b, 4, 16, 1, passes, hops, mean, 32, 7);
  const double at_mean = pipeline_makespan(PipeSchedule::k1f1b, 4, 16, 1, passes, std::vector<HopTimes>(3, HopTimes{1.1, 1.1}));
  CHECK(expected > at_mean + 2);
  CHECK(expected < pipeline_makespan(PipeSchedule::k1f1b, 4, 16, 1, passes, std::vector<HopTimes>(3, HopTimes{3.1, 3.1})));
  CHECK(expected_pipeline_makespan(PipeSchedule::k1f1b, 4, 16, 1, passes, hops, mean, 32, 7) == expected);
  // No delay: the plain makespan; sizes must match the boundaries.
  CHECK(expected_pipeline_makespan(PipeSchedule::k1f1b, 4, 16, 1, passes, hops, std::vector<double>(3), 32, 7) == base);
  CHECK_THROWS_AS(expected_pipeline_makespan(PipeSchedule::k1f1b, 4, 16, 1, passes, hops, std::vector<double>(2), 32, 7),
                  std::invalid_argument);
}
