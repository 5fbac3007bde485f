// The log's job-wide figures: which steps a reduction covers, blocking or in the background,
// with a recording fake and with ranks as threads over an in-process world group.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>

#include "comm/inproc_group.hpp"
#include "engine/train/job_figures.hpp"

using namespace holmes;
using train::FigureExchange;

namespace {

// A one-rank job whose other ranks are folded in as fixed figures: records each reduction
// and whether it blocked.
struct Recorder {
  std::vector<double> other;  // what the other ranks contribute to the maximum
  std::vector<std::vector<double>> blocking, background;
  std::vector<double> max_with_other(std::vector<double> v) const {
    for (size_t i = 0; i < v.size() && i < other.size(); ++i) v[i] = std::max(v[i], other[i]);
    return v;
  }
  FigureExchange exchange(int rank, int world, bool in_background) {
    FigureExchange::Reduce reduce = [this](std::vector<double> v) {
      blocking.push_back(v);
      return max_with_other(std::move(v));
    };
    FigureExchange::Start start;
    if (in_background)
      start = [this](std::vector<double> v) {
        background.push_back(v);
        return std::async(std::launch::deferred, [this, v]() { return max_with_other(v); });
      };
    return FigureExchange(rank, world, reduce, start);
  }
};

}  // namespace

TEST_CASE("background figures: each log line shows the steps up to the previous one, none blocks") {
  Recorder rec;
  rec.other = {15, 0.1, 0, 0, 0.25, 0, 40};  // rank 1 of 2: 15 MiB, its share 25%, 40 ms compute a step
  FigureExchange ex = rec.exchange(/*rank=*/0, /*world=*/2, true);
  REQUIRE(ex.background());
  // Step 1 (the first line): blocking, its own figures.
  ex.note(10, 100, 50, 30);
  std::vector<double> job = ex.now(0);
  REQUIRE(rec.blocking.size() == 1);
  CHECK(train::maxima_of(job, 1).rss_mb == 15);
  CHECK(train::maxima_of(job, 1).comm_share_ranks == std::vector<double>{0.5, 0.25});
  CHECK(train::maxima_of(job, 1).compute_ms_ranks == std::vector<double>{30, 40});
  // Step 2: the first background reduction starts; nothing to show yet.
  ex.note(20, 100, 10, 20);
  CHECK_FALSE(ex.later(2).has_value());
  REQUIRE(rec.background.size() == 1);
  CHECK(rec.background[0][0] == 20);  // step 2's figures alone
  // Step 3 shows step 2's figures and starts step 3's.
  ex.note(12, 100, 90, 60);
  const std::optional<train::JobMaxima> m3 = ex.later(3);
  REQUIRE(m3.has_value());
  CHECK(m3->through == 2);
  CHECK(m3->rss_mb == 20);
  CHECK(m3->comm_share == Approx(0.1));  // step 2's 10% against the other rank's 10%
  REQUIRE(m3->comm_share_ranks.size() == 2);
  CHECK(m3->comm_share_ranks[0] == Approx(0.1));
  CHECK(m3->comm_share_ranks[1] == 0.25);
  CHECK(m3->compute_ms_ranks == std::vector<double>{20, 40});  // step 2's
  REQUIRE(rec.background.size() == 2);
  CHECK(rec.background[1][3] == Approx(0.9));  // step 3's share, not steps 2-3's
  CHECK(rec.blocking.size() == 1);             // no blocking reduction between the first and the last line
  // Step 4 (the last line): blocking, covering steps 3 and 4 (step 3's reduction was not shown).
  ex.note(11, 300, 0, 100);
  job = ex.now(0);
  REQUIRE(rec.blocking.size() == 2);
  CHECK(rec.blocking[1][0] == 12);                     // the larger RSS of steps 3 and 4
  CHECK(rec.blocking[1][1] == Approx(0.9));            // step 3's share, the largest
  CHECK(rec.blocking[1][3] == Approx(90.0 / 400.0));  // rank 0's share of steps 3-4
  CHECK(rec.blocking[1][5] == Approx(80));            // its mean compute over steps 3-4
  CHECK(job[0] == 15);
}

TEST_CASE("blocking figures without a background start: every reduction now, a stop signal's number") {
  Recorder rec;
  FigureExchange ex = rec.exchange(1, 3, false);
  CHECK_FALSE(ex.background());
  ex.note(10, 10, 5, 4);
  ex.note(10, 10, 5, 2);
  std::vector<double> job = ex.now(15);
  REQUIRE(rec.blocking.size() == 1);
  CHECK(job.size() == 3 + 2 * 3);
  CHECK(job[2] == 15);
  CHECK(job[3 + 1] == 0.5);  // its own slots: its share and its mean compute per step
  CHECK(job[3 + 3 + 1] == 3);
  CHECK(job[3] == 0);
  CHECK(job[3 + 3] == 0);
  CHECK_THROWS_AS(train::maxima_of({1, 2, 3, 4}, 1), std::invalid_argument);
  // One process (no reduction at all): its own figures.
  FigureExchange alone(0, 1, nullptr, nullptr);
  alone.note(7, 10, 0, 5);
  CHECK(alone.now(0) == std::vector<double>{7, 0, 0});
}

TEST_CASE("a failed background reduction is reported at the next use") {
  FigureExchange ex(0, 2, [](std::vector<double> v) { return v; }, [](std::vector<double>) {
    return std::async(std::launch::deferred, []() -> std::vector<double> { throw std::runtime_error("peer gone"); });
  });
  ex.note(1, 1, 0, 1);
  CHECK_FALSE(ex.later(2).has_value());
  CHECK_THROWS_WITH(ex.later(3), "peer gone");
  ex.note(1, 1, 0, 1);
  CHECK_FALSE(ex.later(4).has_value());
  CHECK_THROWS_WITH(ex.finish(), "peer gone");
}

TEST_CASE("ranks as threads: background reductions over a real world group agree with blocking ones") {
  // Three ranks each note their own figures every step and call the exchange at the same
  // steps, as the loop does; the background reductions run on threads of their own.
  constexpr int kWorld = 3, kSteps = 6;
  auto hub = std::make_shared<comm::InProcessHub>();
  std::vector<std::vector<std::optional<train::JobMaxima>>> shown(kWorld);
  std::vector<std::vector<double>> last(kWorld);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kWorld; ++r)
    ranks.emplace_back([&, r] {
      comm::GroupSpec gs;
      gs.name = "world";
      gs.global_ranks = {0, 1, 2};
      gs.global_rank = r;
      std::shared_ptr<comm::ProcessGroup> world = comm::make_inproc_group(hub, gs);
      auto max_over = [world](std::vector<double> v) {
        std::vector<float> x(v.begin(), v.end());
        world->all_reduce(std::span<float>(x), comm::ReduceOp::kMax);
        return std::vector<double>(x.begin(), x.end());
      };
      FigureExchange ex(r, kWorld, max_over, [max_over](std::vector<double> v) {
        return std::async(std::launch::async, max_over, std::move(v));
      });
      for (int done = 1; done <= kSteps; ++done) {
        // Rank r's RSS at step s: 10 s + r (the largest: rank 2's).
        ex.note(10.0 * done + r, 100, 10.0 * r, 50.0 + r);
        if (done == 1 || done == kSteps) {
          const std::vector<double> job = ex.now(0);
          shown[r].push_back(train::maxima_of(job, done));
          if (done == kSteps) last[r] = job;
        } else {
          shown[r].push_back(ex.later(done));
        }
      }
    });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < kWorld; ++r) {
    REQUIRE(shown[r].size() == kSteps);
    CHECK_FALSE(shown[r][1].has_value());  // step 2: the first background reduction only started
    for (int done = 3; done < kSteps; ++done) {
      REQUIRE(shown[r][done - 1].has_value());
      CHECK(shown[r][done - 1]->through == done - 1);
      CHECK(shown[r][done - 1]->rss_mb == 10.0 * (done - 1) + 2);
      const std::vector<double>& shares = shown[r][done - 1]->comm_share_ranks;
      REQUIRE(shares.size() == kWorld);
      CHECK(shares[0] == 0);
      CHECK(shares[1] == Approx(0.1));
      CHECK(shares[2] == Approx(0.2));
      CHECK(shown[r][done - 1]->compute_ms_ranks == std::vector<double>{50, 51, 52});
    }
    CHECK(shown[r][kSteps - 1]->through == kSteps);
    CHECK(last[r][0] == 10.0 * kSteps + 2);
  }
}

TEST_CASE("leaving by an exception aborts a background reduction still running, not otherwise") {
  // The reduction waits for peers that never come until the group is aborted (bounded here
  // by 20 s, so that a missing abort fails the test instead of hanging it).
  struct Fake {
    std::mutex m;
    std::condition_variable cv;
    int aborts = 0;
    std::vector<double> reduce(std::vector<double> v) {
      std::unique_lock<std::mutex> lock(m);
      if (!cv.wait_for(lock, std::chrono::seconds(20), [&] { return aborts > 0; })) return v;
      throw std::runtime_error("aborted");
    }
  };
  for (const bool failing : {true, false}) {
    CAPTURE(failing);
    Fake fake;
    std::thread releaser;
    const auto t0 = std::chrono::steady_clock::now();
    {
      std::optional<FigureExchange> ex;
      ex.emplace(0, 2, [](std::vector<double> v) { return v; },
                 [&](std::vector<double> v) { return std::async(std::launch::async, &Fake::reduce, &fake, v); },
                 [&] {
                   std::lock_guard<std::mutex> lock(fake.m);
                   ++fake.aborts;
                   fake.cv.notify_all();
                 });
      ex->note(1, 1, 0, 1);
      CHECK_FALSE(ex->later(2).has_value());  // started, now waiting
      if (failing) {
        CHECK_THROWS_WITH(([&] {
                            const std::optional<FigureExchange> unwound = std::move(ex);
                            throw std::runtime_error("the step failed");
                          }()),
                          "the step failed");
      } else {
        // Not unwinding: the destructor waits for the reduction as it is.
        releaser = std::thread([&] {
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
          std::lock_guard<std::mutex> lock(fake.m);
          fake.aborts = 100;  // lets it end; an abort would add one
          fake.cv.notify_all();
        });
      }
    }
    if (releaser.joinable()) releaser.join();
    const auto took = std::chrono::steady_clock::now() - t0;
    if (failing) {
      CHECK(fake.aborts == 1);
      CHECK(took < std::chrono::seconds(15));
    } else {
      CHECK(fake.aborts == 100);
    }
  }
}
