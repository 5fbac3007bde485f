// Link samples of a calibration probe, summarized per link class.
#include <catch2/catch.hpp>

#include <cmath>

#include "engine/plan/links.hpp"
#include "engine/plan/replicas.hpp"
#include "engine/train/calibration.hpp"

using namespace holmes;

namespace {

train::LinkSample sample(plan::LinkKind kind, double latency_s, double gbps, double declared_gbps) {
  return {static_cast<int>(kind), latency_s, gbps, 30e-6, declared_gbps};
}

}  // namespace

TEST_CASE("link samples become a median efficiency and latency per link class") {
  std::vector<train::LinkSample> all{sample(plan::LinkKind::kEthernet, 100e-6, 0.15, 0.25),
                                     sample(plan::LinkKind::kEthernet, 300e-6, 0.20, 0.25),
                                     sample(plan::LinkKind::kEthernet, 200e-6, 0.225, 0.25),
                                     sample(plan::LinkKind::kIb, 50e-6, 1.8, 2.0),
                                     {-1, 0, 0, 0, 0}};  // an empty slot
  topo::Calibration cal;
  train::summarize_links(all, topo::Calibration{}, cal);
  REQUIRE(cal.links.size() == 2);
  const auto& eth = cal.links.at("ethernet");
  CHECK(eth.efficiency == Approx(0.8));
  CHECK(eth.latency_us == Approx(200));
  CHECK(eth.gbps_per_rank == Approx(0.2));
  CHECK(eth.declared_gbps_per_rank == Approx(0.25));
  CHECK(eth.groups == 3);
  CHECK(cal.links.at("ib").efficiency == Approx(0.9));
}

TEST_CASE("a plan that already used a calibration is measured against the declared rate") {
  // The plan costed IB at 2.0 x 0.5 = 1.0 Gb/s; 0.9 measured is 0.45 of the declared 2.0.
  topo::Calibration previous;
  previous.links["ib"] = {0.5, 50, 0, 0, 1};
  topo::Calibration cal;
  train::summarize_links({sample(plan::LinkKind::kIb, 50e-6, 0.9, 1.0)}, previous, cal);
  CHECK(cal.links.at("ib").efficiency == Approx(0.45));
  CHECK(cal.links.at("ib").declared_gbps_per_rank == Approx(2.0));
}

TEST_CASE("samples of several message sizes give the class an efficiency per size") {
  // Pipeline sends of 256 KB beat the shaped rate (a token bucket's burst), parameter chunks of
  // 4 MB do not: one median would misprice both.
  auto at = [](double gbps, double bytes) {
    train::LinkSample s = sample(plan::LinkKind::kEthernet, 100e-6, gbps, 0.25);
    s.message_bytes = bytes;
    return s;
  };
  topo::Calibration cal;
  train::summarize_links({at(0.30, 262144), at(0.32, 262144), at(0.175, 4194304)}, topo::Calibration{}, cal);
  const auto& eth = cal.links.at("ethernet");
  REQUIRE(eth.sizes.size() == 2);
  CHECK(eth.sizes[0].first == 262144);
  CHECK(eth.sizes[0].second == Approx(1.24));
  CHECK(eth.sizes[1].first == 4194304);
  CHECK(eth.sizes[1].second == Approx(0.7));
  CHECK(eth.efficiency == Approx(1.2));  // the median of the three samples, as before
  // One size only: a one-point curve, the class's efficiency at the size it was measured at
  // (a merge with other jobs' files must not price this size from their curve; gen-6 of the
  // lab priced its tensor-parallel sums 11 times too fast that way).
  topo::Calibration one;
  train::summarize_links({at(0.30, 262144), at(0.2, 262144)}, topo::Calibration{}, one);
  REQUIRE(one.links.at("ethernet").sizes.size() == 1);
  CHECK(one.links.at("ethernet").sizes[0].first == 262144);
  CHECK(one.links.at("ethernet").sizes[0].second == Approx(one.links.at("ethernet").efficiency));
}

TEST_CASE("tensor-parallel sums are priced from what they cost inside the steps") {
  // The start-up probe of a tp pair of CPU processes sees an idle peer (2 Gb/s, 40 us); in the
  // steps each sum of the 64 Ki-float activations took 5 ms (every member reaches it after its
  // own compute). The sample must make the cost model's ring all-reduce reproduce the 5 ms.
  const size_t act = 65536;
  train::LinkSample tp = sample(plan::LinkKind::kIntraNode, 40e-6, 2.0, 100);
  tp.message_bytes = act * 4 / 2;
  std::map<size_t, parallel::Group::SumTally> sums;
  sums[act * 4] = {200, 1.0};   // 200 sums of the activations, 5 ms each
  sums[512 * 4] = {20, 0.04};   // the loss statistics: another size, not the activations
  train::apply_step_sums(tp, sums, 2, act);
  CHECK(tp.step_sum_s == Approx(5e-3));
  CHECK(tp.probe_gbps == Approx(2.0));
  CHECK(tp.message_bytes == Approx(act * 4 / 2.0));
  plan::LinkCost link;
  link.kind = plan::LinkKind::kIntraNode;
  link.latency_s = tp.latency_s;
  link.gbps_per_rank = tp.gbps;
  CHECK(plan::ring_all_reduce_s(link, 2, act * 4.0) == Approx(5e-3));

  topo::Calibration cal;
  train::summarize_links({tp}, topo::Calibration{}, cal);
  CHECK(cal.links.at("intra-node").efficiency == Approx(tp.gbps / 100));
  CHECK(cal.links.at("intra-node").tp_sum_ms == Approx(5));
  // A file with the figure reads back (people read it; the efficiency carries it).
  const topo::Calibration back = topo::parse_calibration_yaml(topo::format_calibration_yaml(cal), "t.yaml");
  CHECK(back.links.at("intra-node").tp_sum_ms == Approx(5));

  // No sum of the activations timed (a run without steady steps): the probe stands.
  train::LinkSample idle = sample(plan::LinkKind::kIntraNode, 40e-6, 2.0, 100);
  train::apply_step_sums(idle, {{512 * 4, {20, 0.04}}}, 2, act);
  CHECK(idle.gbps == 2.0);
  CHECK(idle.step_sum_s == 0);
}

TEST_CASE("the calibrated device rate is the slowest declared device's, from the most held-back stage") {
  // Lab gen-2, holmes case: the slower node (declared 0.75 of the others) sat in stage 0, which
  // waited on the others 46% of its step and computed in bursts under its CPU quota; the busy
  // stage 2 (a faster node) measured 2.05 times its planned rate. The slowest device's rate is
  // that ratio times its own planned rate, not the slowest measured figure (a faster node's).
  const std::vector<double> measured{0.05234, 0.05649, 0.05115}, planned{0.01875, 0.025, 0.025};
  CHECK(train::slowest_device_tflops(measured, planned) == Approx(0.05115 / 0.025 * 0.01875));
  // Equal devices: the slowest stage's measured rate, as before.
  CHECK(train::slowest_device_tflops({0.3, 0.2, 0.25}, {0.5, 0.5, 0.5}) == Approx(0.2));
  // Nothing planned: the slowest measured rate; nothing measured: 0.
  CHECK(train::slowest_device_tflops({0.3, 0.2}, {0, 0}) == Approx(0.2));
  CHECK(train::slowest_device_tflops({0, 0}, {0.5, 0.5}) == 0);
}

TEST_CASE("diloco's outer exchange is calibrated at the rate it moved inside the steps") {
  // A member of 4 sends 2 x 3 parts of 425344 bytes per exchange; the group's link was planned
  // at 0.0495 Gb/s per rank = 0.05 declared x 0.99 (the probe's efficiency the plan carried).
  const double bytes = 2 * 3 * 425344.0, latency = 1e-3;
  const double t = bytes * 8 / (0.7 * 0.05e9);  // 0.7 of the declared rate
  std::vector<train::OuterWire> ranks{{2 * (t + 6 * latency), 2 * bytes, 2},  // two exchanges
                                      {t / 0.7 * 0.8 + 6 * latency, bytes, 1},   // at 0.8
                                      {t / 0.7 * 0.5 + 6 * latency, bytes, 1},   // at 0.5
                                      {0, 0, 0}};                                // no exchange: left out
  CHECK(train::outer_efficiency(ranks, 4, latency, 0.0495, 0.99) == Approx(0.7));  // the median of 0.5, 0.7, 0.8
  CHECK(train::outer_efficiency({{0, 0, 0}}, 4, latency, 0.0495, 0.99) == 0);
}

TEST_CASE("the replicas' drift is the ranks' mean wait at the sums before the exchanges, per sqrt(step)") {
  // Each rank's sums before an exchange: wall seconds in all and how many. The ring's own
  // 2 (N - 1) latencies are not waiting; ranks that made none are left out.
  const double ring = 0.001, e4 = holmes::plan::expected_max_normal(4);
  const std::vector<train::PresyncWait> ranks{{0.300, 2}, {0.100, 1}, {0, 0}};
  const double mean_wait = ((0.150 - ring) + (0.100 - ring)) / 2;
  CHECK(train::replica_drift_ms(ranks, 4, 20, ring) == Approx(1e3 * mean_wait / (std::sqrt(20.0) * e4)));
  // What plan::drift_per_step_s prices back at the same period: the mean wait once per 20 steps.
  CHECK(holmes::plan::drift_per_step_s(train::replica_drift_ms(ranks, 4, 20, ring) * 1e-3, 4, 20, 1) ==
        Approx(mean_wait / 20));
  // A sum faster than the ring (clock granularity) counts as no wait; nothing summed: not measured.
  CHECK(train::replica_drift_ms({{0.0005, 1}}, 4, 20, ring) == 0);
  CHECK(train::replica_drift_ms({{0, 0}}, 4, 20, ring) == 0);
  CHECK(train::replica_drift_ms({{0.3, 1}}, 1, 20, ring) == 0);  // one replica: nobody to wait for
}

TEST_CASE("the host communication path's CPU per byte is the median over the ranks that moved bytes") {
  // Each rank's process CPU over its probe transfers (every thread) and the bytes it sent.
  const std::vector<train::HostComm> ranks = {{0.030, 1e7}, {0.025, 1e7}, {0.040, 1e7}, {0, 0}};
  CHECK(train::host_comm_ns_per_byte(ranks) == Approx(3.0));  // 3.0, 2.5 and 4.0 ns: the median
  CHECK(train::host_comm_ns_per_byte({{0, 0}}) == 0);           // a single process: nothing moved
  CHECK(train::host_comm_ns_per_byte({}) == 0);
  // Per send or receive of the probe's one-float exchanges: the median over the ranks that made any.
  const std::vector<train::HostComm> ops{{0, 0, 14e-3, 140}, {0, 0, 7e-3, 140}, {0, 0, 21e-3, 140}, {0, 0, 0, 0}};
  CHECK(train::host_comm_us_per_message(ops) == Approx(100));
  CHECK(train::host_comm_us_per_message({{0.01, 1e6}}) == 0);
}

TEST_CASE("the tensor-parallel sums' CPU is priced per byte apart from the passes") {
  // A rank's tp group tally over 4 steps: two message sizes, the training thread's CPU inside
  // the sums and the process's meanwhile (Gloo's I/O threads serving them).
  std::map<size_t, holmes::parallel::Group::SumTally> sums;
  sums[131072] = {64, 0.4, 0.08, 0.8};
  sums[4] = {8, 0.01, 0.004, 0.006};
  const train::TpSumsCpu t = train::tp_sums_cpu_per_step(sums, 4);
  CHECK(t.thread_s == Approx(0.084 / 4));
  CHECK(t.process_s == Approx(0.806 / 4));
  CHECK(train::tp_sums_cpu_per_step(sums, 0).process_s == 0);
  // The process's clock includes the thread's: never below it (two clocks read apart).
  sums[4] = {8, 0.01, 0.004, 0.0};
  sums[131072] = {64, 0.4, 0.08, 0.07};
  CHECK(train::tp_sums_cpu_per_step(sums, 2).process_s == Approx(0.084 / 2));
  // Per rank: CPU seconds per step in the sums over the plan's tp bytes per step; the median.
  const std::vector<double> none(3, 0.0);
  CHECK(train::tp_sums_ns_per_byte({0.2, 0.3, 0.25}, none, none, 1.5, {2e7, 2e7, 2e7}) == Approx(12.5));
  // A rank without tp bytes is out.
  CHECK(train::tp_sums_ns_per_byte({0.2, 0.1}, {0, 0}, {0, 0}, 1.5, {2e7, 0}) == Approx(10.0));
  CHECK(train::tp_sums_ns_per_byte({}, {}, {}, 1.5, {}) == 0);
  // The other threads' CPU outside the sums beyond the probe's price of the rank's pipeline and
  // data-parallel bytes is the sums' too (Gloo's I/O threads took in the peer's part early):
  // 24 ms for 2 MB at 1.5 ns/B leaves 21 ms to the sums.
  CHECK(train::tp_sums_ns_per_byte({0.2}, {0.024}, {2e6}, 1.5, {2e7}) == Approx((0.2 + 0.021) / 2e7 * 1e9));
  // Never less than the windows' own: other threads that spent less than the probe's price.
  CHECK(train::tp_sums_ns_per_byte({0.2}, {0.001}, {2e6}, 1.5, {2e7}) == Approx(10.0));
}

TEST_CASE("the host communication path's CPU per byte in the steps is each rank's other threads' CPU over its bytes") {
  // Per rank: the process's CPU beyond the training thread in the median step, over the bytes
  // the plan says its stage's rank sends per step; a rank that sends none (a stage alone) is out.
  CHECK(train::host_comm_steps_ns_per_byte({0.006, 0.009, 0.012, 0.001}, {3e6, 3e6, 3e6, 0}) == Approx(3.0));
  CHECK(train::host_comm_steps_ns_per_byte({0.006}, {0}) == 0);
  // A rank that moves less than a MiB a step is out: its data loader and small sums would read
  // as a high price per byte (1 ms over 100 kB: 10 ns/B).
  CHECK(train::host_comm_steps_ns_per_byte({0.001, 0.006}, {1e5, 3e6}) == Approx(2.0));
  CHECK(train::host_comm_steps_ns_per_byte({0.001}, {1e5}) == 0);
  CHECK(train::host_comm_steps_ns_per_byte({}, {}) == 0);
}

TEST_CASE("the optimizer's update is priced per parameter and the rest of the host time per rank") {
  // Two ranks: one holds the embedding (9 M parameters), one does not (1 M); both spent 8 ms a
  // step outside their passes and waits, of which the update 1.8 and 0.2 ms.
  topo::Calibration cal;
  train::calibrate_host_work({{8e-3, 1.8e-3, 9e6}, {8e-3, 0.2e-3, 1e6}}, cal);
  CHECK(cal.update_ns_per_param == Approx(2e-3 / 10e6 * 1e9));  // 0.2 ns
  CHECK(cal.host_us_per_step == Approx((6.2e-3 + 7.8e-3) / 2 * 1e6));  // 7 ms a rank
  // Ranks of an older trainer, without the update timed apart: all of it per parameter.
  topo::Calibration old;
  train::calibrate_host_work({{8e-3, 0, 9e6}, {8e-3, 0, 1e6}}, old);
  CHECK(old.update_ns_per_param == Approx(16e-3 / 10e6 * 1e9));
  CHECK(old.host_us_per_step == 0);
  // An update that took longer than the rest of the host time measured (clock noise) leaves none.
  topo::Calibration tight;
  train::calibrate_host_work({{1e-3, 2e-3, 1e6}}, tight);
  CHECK(tight.host_us_per_step == 0);
  CHECK(tight.update_ns_per_param == Approx(2e-3 / 1e6 * 1e9));
}
