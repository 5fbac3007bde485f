// The run report from partial and damaged run folders: a page that says what is missing,
// never a crash; only a folder that is no run at all is an error (exit 2).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "common/errors.hpp"
#include "engine/plan/plan.hpp"
#include "engine/tools/plan_read.hpp"
#include "engine/tools/report.hpp"
#include "test/support/cluster_gen.hpp"

namespace fs = std::filesystem;
namespace ht = holmes::tools;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("holmes-report-" + std::to_string(std::random_device{}()));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  void write(const std::string& name, const std::string& text) const { std::ofstream(path / name) << text; }
};

std::string row(int step, double loss) {
  return "{\"step\": " + std::to_string(step) + ", \"loss\": " + std::to_string(loss) +
         ", \"step_ms\": 12.5, \"tokens_per_s\": 1000, \"mfu\": 3.5, \"comm_share\": 0.1}\n";
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

holmes::plan::Plan small_plan() {
  auto t = holmes::plan::testing::make_cluster({{holmes::topo::NicKind::kIb, 1, 2}, {holmes::topo::NicKind::kRoce, 1, 2}});
  return holmes::plan::make_plan(holmes::plan::testing::make_spec(4, 256, 4, 1, 2, 2, 1, 8, 256), t);
}

}  // namespace

TEST_CASE("a folder that is no run is refused with exit 2 and says what a run folder is", "[report]") {
  TempDir d;
  CHECK_THROWS_AS(ht::read_run_files((d.path / "nope").string()), holmes::UserError);
  d.write("notes.txt", "hello");
  try {
    ht::read_run_files(d.path.string());
    FAIL("no error");
  } catch (const holmes::UserError& e) {
    CHECK_THAT(e.what(), Catch::Contains("is not a run folder") && Catch::Contains("run.json") &&
                             Catch::Contains("metrics.jsonl"));
  }
  CHECK_THROWS_AS(ht::read_run_files((d.path / "notes.txt").string()), holmes::UserError);
}

TEST_CASE("two rows and a truncated last line give a page that says what is missing", "[report]") {
  TempDir d;
  d.write("metrics.jsonl", row(1, 5.5) + row(2, 5.25) + "{\"step\": 3, \"lo");
  const ht::RunFiles f = ht::read_run_files(d.path.string());
  CHECK(f.rows.size() == 2);
  bool truncated = false, no_plan = false;
  for (const auto& m : f.missing) {
    truncated = truncated || m.find("last line (3) is incomplete") != std::string::npos;
    no_plan = no_plan || m.find("no plan") != std::string::npos;
  }
  CHECK(truncated);
  CHECK(no_plan);
  const std::string page = ht::format_report_html(f);
  CHECK(page.find("class=\"missing-list\"") != std::string::npos);
  CHECK(page.find("data-series=\"loss\" data-points=\"2\"") != std::string::npos);
  CHECK(page.find("http-equiv=\"refresh\"") == std::string::npos);  // not live
}

TEST_CASE("an empty metrics file, a bad middle line and a broken plan still give a page", "[report]") {
  TempDir d;
  d.write("run.json", "{\"run\": \"abc\", \"job\": \"<b>job</b>\", \"started\": \"2026-01-01T00:00:00Z\"}\n");
  d.write("metrics.jsonl", "");
  d.write("plan.json", "{\"format\": \"holmes-plan/1\", \"world\": 4}");
  ht::RunFiles f = ht::read_run_files(d.path.string());
  CHECK(f.rows.empty());
  CHECK_FALSE(f.plan);
  std::string page = ht::format_report_html(f);
  CHECK(page.find("<b>job") == std::string::npos);
  CHECK(page.find("&lt;b&gt;job") != std::string::npos);
  CHECK(page.find("no data yet") != std::string::npos);
  CHECK(page.find("the plan picture is left out") != std::string::npos);

  d.write("metrics.jsonl", row(1, 5) + "garbage\n" + row(2, 4.5) + row(3, 4.25));
  f = ht::read_run_files(d.path.string());
  CHECK(f.rows.size() == 3);
  bool said = false;
  for (const auto& m : f.missing) said = said || m.find("1 line(s) are not metrics rows (the first: line 2)") != std::string::npos;
  CHECK(said);
}

TEST_CASE("the plan read back from its JSON draws the same picture", "[report]") {
  holmes::plan::Plan p = small_plan();
  p.activation.schedule = holmes::spec::Schedule::kZbH1;  // as parallel.schedule: auto would choose
  p.schedule_chosen = true;
  p.activation_chosen = true;
  const holmes::plan::Plan back = ht::read_plan_json(holmes::plan::format_plan_json(p), "plan.json");
  CHECK(back.world == p.world);
  CHECK(back.groups.size() == p.groups.size());
  CHECK(back.estimate.step_time_s == Approx(p.estimate.step_time_s));
  CHECK(holmes::plan::plan_html_section(back) == holmes::plan::plan_html_section(p));
  CHECK(holmes::plan::plan_html_section(back).find("<b>schedule</b> zb-h1 (chosen)") != std::string::npos);
  CHECK(holmes::plan::plan_html_section(back).find("<b>recompute</b> ") != std::string::npos);
}

TEST_CASE("a run with a plan, per-rank figures and a floor draws them all", "[report]") {
  TempDir d;
  d.write("plan.json", holmes::plan::format_plan_json(small_plan()));
  std::string m;
  for (int s = 1; s <= 5; ++s)
    m += "{\"step\": " + std::to_string(s) + ", \"loss\": " + std::to_string(6.0 - s * 0.5) +
         ", \"step_ms\": 20, \"tokens_per_s\": 4000, \"mfu\": 2, \"comm_share\": 0.2, \"comm_share_max\": 0.4" +
         (s == 1 ? ", \"entropy_floor\": 2.5" : "") + ", \"comm_share_ranks\": [0.2, 0.4, 0.1, 0.3]}\n";
  m += "{\"step\": 5, \"val_loss\": 3.6, \"entropy_floor\": 2.5}\n";
  d.write("metrics.jsonl", m);
  const ht::RunFiles f = ht::read_run_files(d.path.string());
  const std::string page = ht::format_report_html(f);
  CHECK(count(page, "data-series=\"loss\" data-points=\"5\"") == 2);  // against steps and tokens
  CHECK(count(page, "data-series=\"validation loss\" data-points=\"1\"") == 2);
  CHECK(count(page, "class=\"floor\"") == 2);
  CHECK(count(page, "data-series=\"rank ") == 4);
  CHECK(page.find("data-chart=\"rank-split\"") != std::string::npos);
  CHECK(page.find("data-chart=\"step-measured-planned\"") != std::string::npos);
  CHECK(count(page, "<tr class=\"stage\"") == 2);
}

TEST_CASE("a diloco run's replica-local losses get a curve of their own", "[report]") {
  // Steps 1-3 and 5 carry replica 0's loss (loss_replica), 4 and 6 the job's (outer syncs).
  TempDir d;
  std::string m;
  for (int s = 1; s <= 6; ++s) {
    std::string r = row(s, 6.0 - s * 0.25);
    if (s % 2 == 1 || s == 2) r.insert(r.size() - 2, ", \"loss_replica\": 0");
    m += r;
  }
  d.write("metrics.jsonl", m);
  const std::string page = ht::format_report_html(ht::read_run_files(d.path.string()));
  CHECK(count(page, "data-series=\"loss\" data-points=\"2\"") == 2);  // steps 4 and 6, by steps and tokens
  CHECK(count(page, "data-series=\"loss of replica 0 alone\" data-points=\"4\"") == 2);
}

TEST_CASE("per-rank figures reduced in the background are read at the step they end at", "[report]") {
  TempDir d;
  // Row 3 carries the figures of step 2 (figures_step); a row without the key, its own step's.
  d.write("metrics.jsonl",
          "{\"step\": 1, \"loss\": 5, \"step_ms\": 20, \"comm_share\": 0.2, \"comm_share_max\": 0.3, \"comm_share_ranks\": [0.2, 0.3]}\n"
          "{\"step\": 2, \"loss\": 4.9, \"step_ms\": 20, \"comm_share\": 0.2}\n"
          "{\"step\": 3, \"loss\": 4.8, \"step_ms\": 20, \"comm_share\": 0.2, \"comm_share_max\": 0.4, \"figures_step\": 2, "
          "\"comm_share_ranks\": [0.2, 0.4]}\n");
  const ht::RunFiles f = ht::read_run_files(d.path.string());
  REQUIRE(f.rows.size() == 3);
  CHECK(f.rows[0].figures_step == 1);
  CHECK(f.rows[2].figures_step == 2);
}

TEST_CASE("a mixture's validation loss per source gets a curve each", "[report]") {
  TempDir d;
  std::string m = row(1, 5.0) + row(2, 4.5);
  m += "{\"step\": 2, \"val_loss\": 4.4, \"val_loss/web\": 4.2, \"val_loss/code\": 4.9}\n";
  m += row(3, 4.2) + row(4, 4.0);
  m += "{\"step\": 4, \"val_loss\": 4.1, \"val_loss/web\": 3.9, \"val_loss/code\": 4.6}\n";
  d.write("metrics.jsonl", m);
  const ht::RunFiles files = ht::read_run_files(d.path.string());
  REQUIRE(files.rows.size() == 6);
  REQUIRE(files.rows[2].val_sources.size() == 2);
  CHECK(files.rows[2].val_sources[0] == std::pair<std::string, double>{"code", 4.9});  // by name
  const std::string page = ht::format_report_html(files);
  CHECK(count(page, "data-series=\"validation loss\" data-points=\"2\"") == 2);
  CHECK(count(page, "data-series=\"validation loss, web\" data-points=\"2\"") == 2);  // by steps and tokens
  CHECK(count(page, "data-series=\"validation loss, code\" data-points=\"2\"") == 2);
}

TEST_CASE("the stragglers the log named are drawn as a table beside each rank's compute", "[report]") {
  TempDir d;
  d.write("plan.json", holmes::plan::format_plan_json(small_plan()));
  // Rows 3-5 name rank 3 (since step 2), rows 4-6 replica 1; row 6 no longer names rank 3.
  std::string m;
  const char* ranks[] = {"[]", "[]", "[{\"rank\": 3, \"ratio\": 1.5, \"since\": 2, \"peers\": 1}]",
                         "[{\"rank\": 3, \"ratio\": 1.6, \"since\": 2, \"peers\": 1}]",
                         "[{\"rank\": 3, \"ratio\": 1.55, \"since\": 2, \"peers\": 1}]", "[]"};
  for (int s = 1; s <= 6; ++s) {
    const std::string replicas = s >= 4 ? "[{\"replica\": 1, \"ratio\": 1.3, \"since\": 3, \"peers\": 1}]" : "[]";
    m += "{\"step\": " + std::to_string(s) + ", \"loss\": 5, \"step_ms\": 20, \"figures_step\": " + std::to_string(s) +
         ", \"compute_ms_ranks\": [10, 10, 10, " + (s >= 2 && s <= 5 ? "16" : "10") + "], \"stragglers\": " +
         ranks[s - 1] + ", \"straggler_replicas\": " + replicas + "}\n";
  }
  d.write("metrics.jsonl", m);
  const ht::RunFiles f = ht::read_run_files(d.path.string());
  REQUIRE(f.rows.size() == 6);
  CHECK(f.rows[0].has_stragglers);
  REQUIRE(f.rows[3].stragglers.size() == 1);
  CHECK(f.rows[3].stragglers[0].id == 3);
  CHECK(f.rows[3].stragglers[0].ratio == 1.6);
  CHECK(f.rows[3].compute_ms_ranks == std::vector<double>{10, 10, 10, 16});
  const std::string page = ht::format_report_html(f);
  CHECK(count(page, "<tr class=\"straggler\"") == 2);
  CHECK(count(page, "data-chart=\"compute-ranks\"") == 1);
  CHECK(count(page, "data-series=\"rank 3 (straggler)\" data-points=\"6\"") == 1);
  CHECK(count(page, "data-series=\"rank 2\" data-points=\"6\"") == 1);
  const size_t rank_row = page.find("<tr class=\"straggler\" data-kind=\"rank\" data-id=\"3\">");
  REQUIRE(rank_row != std::string::npos);
  const std::string row3 = page.substr(rank_row, page.find("</tr>", rank_row) - rank_row);
  CHECK_THAT(row3, Catch::Contains("rank 3: node") && Catch::Contains("<td class=\"n\">2</td>") &&
                       Catch::Contains("back under by step 6") && Catch::Contains("1.55x") &&
                       Catch::Contains("1.60x") && Catch::Contains("1 rank<"));
  const size_t replica_row = page.find("<tr class=\"straggler\" data-kind=\"replica\" data-id=\"1\">");
  REQUIRE(replica_row != std::string::npos);
  CHECK(page.find("the last row", replica_row) != std::string::npos);
  // Rows without the lists (a single process, an older run): the section says so.
  TempDir old;
  old.write("metrics.jsonl", row(1, 5.0) + row(2, 4.5));
  CHECK_THAT(ht::format_report_html(ht::read_run_files(old.path.string())),
             Catch::Contains("No per-rank compute figures"));
  // Lists read but nobody named.
  TempDir calm;
  calm.write("metrics.jsonl", "{\"step\": 1, \"loss\": 5, \"compute_ms_ranks\": [10, 11], \"stragglers\": []}\n" +
                                  row(2, 4.5));
  CHECK_THAT(ht::format_report_html(ht::read_run_files(calm.path.string())),
             Catch::Contains("No rank or replica was named a straggler"));
}
