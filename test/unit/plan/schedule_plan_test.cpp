// parallel.schedule in the planner: zb-h1's bubble and its W passes against the pipeline
// sends, its activations (every stage holds min(m, p) micro-batches, each with the gradients
// W reads), auto taking the fastest that fits, and --plan-only showing the choice, its
// runner-up and its effect over 1f1b.
#include <catch2/catch.hpp>

#include "engine/plan/cost_model.hpp"
#include "engine/plan/plan.hpp"
#include "test/support/cluster_gen.hpp"
#include "model/gpt2/gpt2.hpp"

namespace hp = holmes::plan;
using holmes::spec::Recompute;
using holmes::spec::Schedule;
using holmes::topo::NicKind;

namespace {

// Two islands of 2 nodes x 8 GPUs joined by Ethernet, tensor 8, pipeline 2 (one stage per
// island), data 2: the pipeline crosses the slow link, as the Holmes plan has it.
holmes::spec::JobSpec two_islands() { return hp::testing::make_spec(24, 2048, 16, 8, 2, 2, 1, 32, 2048); }

}  // namespace

TEST_CASE("schedule: zb-h1's estimate has the smaller bubble, sends price as under 1f1b", "[plan][schedule]") {
  hp::StageTime t;  // F = B = W = 1
  t.compute_s = 3, t.weights_s = t.forward_s = 1, t.send_next_s = 0.5;
  CHECK(t.pp_exposed_s() == 0);  // the send runs beside the stage's own passes
  CHECK(t.per_micro_batch() == 3);
  CHECK(t.bubble_s(4) == Approx(3 * (3 - 2)));  // (p - 1)(F + B - W)
  t.send_next_s = 4.5;                          // a link slower than the stage's work
  CHECK(t.pp_exposed_s() == Approx(1.5));
  CHECK(t.bubble_s(4) == Approx(3 * (4.5 - 2)));
  hp::StageTime f;  // 1f1b: no W moves
  f.compute_s = 3, f.send_next_s = 4.5;
  CHECK(f.per_micro_batch() == Approx(4.5));
  CHECK(f.bubble_s(4) == Approx(3 * 4.5));
  CHECK(f.bubble_s(4) - t.bubble_s(4) == Approx(3 * 2 * t.weights_s));  // what zb-h1 saves
}

TEST_CASE("schedule: under full recomputation zb-h1's W passes outlast the forwards and hide less bubble",
          "[plan][schedule]") {
  // Each W pass replays the block's forward before its GEMMs (recompute_flops_per_token counts
  // the replay twice with a split backward), so W > F and the tables hide only F of each
  // fill-and-drain slot besides W: (p - 1)(F + B - F) = (p - 1) B, not the paper's (p - 1)(F +
  // B - W) (the tables' timing: schedule_test, "... unequal F, B and W").
  hp::Workload w;
  w.shape = holmes::model::gpt2::config(4, 256, 8, 1000, 128);
  w.seq_len = 128;
  w.micro_batch = 2;
  hp::StageCost mid;
  mid.tflops = 100;
  w.activation = hp::ActivationMode::of(Recompute::kNone, Schedule::kZbH1);
  const hp::StageTime none = mid.time(w, 2);
  REQUIRE(none.weights_s < none.forward_s);  // the GEMMs' weight gradients, no attention
  CHECK(none.forward_s == Approx((none.compute_s - none.recompute_s) / 3));
  CHECK(none.bubble_s(4) == Approx(3 * (none.per_micro_batch() - 2 * none.weights_s)));  // the paper's
  w.activation = hp::ActivationMode::of(Recompute::kFull, Schedule::kZbH1);
  const hp::StageTime full = mid.time(w, 2);
  REQUIRE(full.weights_s > full.forward_s);
  CHECK(full.forward_s == Approx(none.forward_s));  // the replays run in B and W, not in F
  const double b = full.compute_s - full.forward_s - full.weights_s;
  CHECK(full.bubble_s(4) == Approx(3 * b));
  CHECK(full.bubble_s(4) > 3 * (full.per_micro_batch() - 2 * full.weights_s));
  // 1f1b's bubble is the whole slot either way.
  w.activation = hp::ActivationMode::of(Recompute::kFull, Schedule::k1f1b);
  CHECK(mid.time(w, 2).bubble_s(4) == Approx(3 * mid.time(w, 2).per_micro_batch()));
}

TEST_CASE("schedule: auto picks zb-h1 across islands, 1f1b is the runner-up, both shown", "[plan][schedule]") {
  const auto topo = hp::testing::make_cluster({{NicKind::kIb, 2, 8}, {NicKind::kRoce, 2, 8}});
  auto spec = two_islands();
  spec.train.recompute = Recompute::kNone;
  spec.parallel.schedule = Schedule::k1f1b;
  const hp::Plan f1b = hp::make_plan(spec, topo);
  CHECK_FALSE(f1b.activation_chosen);
  CHECK_FALSE(f1b.has_one_f_one_b);
  spec.parallel.schedule = Schedule::kZbH1;
  const hp::Plan zb = hp::make_plan(spec, topo);
  CHECK(zb.activation.schedule == Schedule::kZbH1);
  CHECK(zb.estimate.bubble_s < f1b.estimate.bubble_s);
  CHECK(zb.estimate.step_time_s < f1b.estimate.step_time_s);
  CHECK(zb.estimate.pp_comm_s <= f1b.estimate.pp_comm_s);
  // More held: every stage min(m, p) micro-batches, and the gradients W reads.
  CHECK(zb.activation.activations > f1b.activation.activations);
  CHECK(hp::plan_hash(zb) != hp::plan_hash(f1b));
  REQUIRE(zb.has_one_f_one_b);
  CHECK(zb.one_f_one_b.step_time_s == Approx(f1b.estimate.step_time_s));

  spec.parallel.schedule = Schedule::kAuto;
  const hp::Plan p = hp::make_plan(spec, topo);
  CHECK(p.activation.schedule == Schedule::kZbH1);
  CHECK(p.activation.recompute == Recompute::kNone);
  REQUIRE(p.activation_chosen);
  CHECK(p.schedule_chosen);
  CHECK_FALSE(p.recompute_chosen);
  CHECK(p.runner_up.schedule == Schedule::k1f1b);
  CHECK(p.runner_up.step_time_s == Approx(f1b.estimate.step_time_s));
  const std::string text = hp::format_plan_text(p);
  CHECK_THAT(text, Catch::Contains("Schedule and recomputation (parallel.schedule auto, train.recompute as given): "
                                   "zb-h1, recompute none"));
  CHECK_THAT(text, Catch::Contains("runner-up: 1f1b, recompute none"));
  CHECK_THAT(text, Catch::Contains("zb-h1 gains +"));
  const std::string json = hp::format_plan_json(p);
  CHECK_THAT(json, Catch::Contains("\"plan\": {\"schedule\": \"zb-h1\", \"recompute\": \"none\""));
  CHECK_THAT(json, Catch::Contains("\"one_f_one_b\": {\"schedule\": \"1f1b\""));
}

TEST_CASE("schedule: one stage gains nothing from zb-h1, so auto keeps 1f1b", "[plan][schedule]") {
  const auto topo = hp::testing::make_cluster({{NicKind::kIb, 1, 8}});
  auto spec = hp::testing::make_spec(24, 2048, 16, 8, 1, 1, 1, 8, 2048);
  const hp::Plan p = hp::make_plan(spec, topo);
  CHECK(p.activation.schedule == Schedule::k1f1b);
  CHECK(p.estimate.bubble_s == 0);
}

TEST_CASE("schedule: when zb-h1's extra activations do not fit, auto keeps 1f1b", "[plan][schedule]") {
  // The same two islands at 8192 tokens, the micro-batch grown until 1f1b still fits and zb-h1
  // does not: under zb-h1 the last stage holds two micro-batches instead of one, and every
  // stage keeps the gradients W reads.
  const auto topo = hp::testing::make_cluster({{NicKind::kIb, 2, 8}, {NicKind::kRoce, 2, 8}});
  auto spec = two_islands();
  spec.train.recompute = Recompute::kNone;
  spec.train.seq_len = spec.model.max_seq_len = 8192;
  auto fits = [&](Schedule s) {
    spec.parallel.schedule = s;
    try {
      hp::make_plan(spec, topo);
      return true;
    } catch (const std::exception&) {
      return false;
    }
  };
  for (int mb : {1, 2, 4, 8, 16}) {
    spec.train.micro_batch = mb;
    spec.train.global_batch = 2 * mb * 16;
    const bool zb_fits = fits(Schedule::kZbH1), f1b_fits = fits(Schedule::k1f1b);
    if (zb_fits || !f1b_fits) continue;
    INFO("micro_batch " << mb);
    spec.parallel.schedule = Schedule::kAuto;
    const hp::Plan p = hp::make_plan(spec, topo);
    CHECK(p.activation.schedule == Schedule::k1f1b);
    CHECK_FALSE(p.runner_up.fits);
    return;
  }
  FAIL("no micro-batch size where 1f1b fits and zb-h1 does not");
}

// Interleaved with V chunks: the bubble is 1F1B's over V, every boundary is crossed V times per
// micro-batch plus the wrap-around hop from the last stage to stage 0 (V - 1 times), and each
// chunk's model allocates the slots its own steps of the table keep in flight.
TEST_CASE("schedule: interleaved's bubble, sends and activations", "[plan][schedule][interleaved]") {
  hp::StageTime t;
  t.compute_s = 3, t.chunks = 4;
  CHECK(t.bubble_s(4) == Approx(3 * 3.0 / 4));

  const auto topo = hp::testing::make_cluster({{NicKind::kIb, 2, 8}, {NicKind::kRoce, 2, 8}});
  auto spec = two_islands();
  spec.train.recompute = Recompute::kNone;
  spec.parallel.schedule = Schedule::k1f1b;
  const hp::Plan f1b = hp::make_plan(spec, topo);
  spec.parallel.schedule = Schedule::kInterleaved;
  spec.parallel.virtual_stages = 3;
  const hp::Plan il = hp::make_plan(spec, topo);
  REQUIRE(il.activation.schedule == Schedule::kInterleaved);
  REQUIRE(il.activation.virtual_stages == 3);
  CHECK(il.estimate.bubble_s < f1b.estimate.bubble_s);
  // Pipeline bytes over Ethernet: 1F1B crosses the one island boundary once each way per
  // micro-batch; interleaved crosses it 3 times and the wrap-around (stage 1 -> stage 0, also
  // across the islands) twice: 8 more bf16 activations [1, 2048, 2048] per micro-batch (m = 16)
  // and data-parallel rank (2), summed over the tensor ranks' eighths. The tied embedding's sum
  // is the same in both.
  const int eth = static_cast<int>(hp::LinkKind::kEthernet);
  CHECK(il.estimate.bytes_per_step[eth] - f1b.estimate.bytes_per_step[eth] ==
        Approx(8.0 * 16 * 2 * 2048.0 * 2048 * 2));
  CHECK(il.estimate.pp_comm_s > f1b.estimate.pp_comm_s);
  CHECK(hp::plan_hash(il) != hp::plan_hash(f1b));
  spec.parallel.virtual_stages = 2;
  CHECK(hp::plan_hash(hp::make_plan(spec, topo)) != hp::plan_hash(il));

  // Activations from the tables: p = 2, m = 16 (32 / dp 2 / micro-batch 1): each chunk allocates
  // what interleaved_1f1b keeps in flight of it.
  const std::vector<int> slots = hp::chunk_slots(16, 2, 0, 3);
  CHECK(slots == std::vector<int>{4, 3, 2});
  const std::vector<int> last = hp::chunk_slots(16, 2, 1, 3);
  CHECK(last == std::vector<int>{4, 2, 1});
}

TEST_CASE("schedule: interleaved activations = each chunk's slots x its layers", "[plan][schedule][interleaved]") {
  hp::Workload w;
  w.shape = holmes::model::gpt2::config(12, 256, 4, 1024, 64);
  w.seq_len = 64, w.micro_batch = 1, w.micro_batches = 9;
  hp::StageCost mid;  // a middle stage: no embedding, no head
  mid.stage = 1, mid.tp = 1, mid.dp = 1;
  w.activation = hp::ActivationMode::of(Recompute::kNone, Schedule::k1f1b);
  const double block = hp::block_activation_bytes(w.shape, 64, 1, 1, 4, w.activation);
  // Per slot also the chunk's input (fp32 [1, 64, 256]); beside the slots, the work buffers a
  // replay or backward shares (the same in both).
  const double input = 64 * 256 * 4;
  const double f1b = mid.memory(w, 3, 4).activations;  // 1f1b: p - s = 2 micro-batches
  w.activation = hp::ActivationMode::of(Recompute::kNone, Schedule::kInterleaved, 2);
  const std::vector<int> slots = hp::chunk_slots(9, 3, 1, 2);
  REQUIRE(slots.size() == 2);
  CHECK(mid.memory(w, 3, 4).activations - f1b ==
        Approx((slots[0] + slots[1]) * (2 * block + input) - 2 * (4 * block + input)));
  CHECK(slots[0] + slots[1] > 2 * 2);  // holds more than 1f1b's stage (2 micro-batches of 4 layers)
}
