// The training side of a re-plan (engine/train/replan_restart.hpp): the metrics rows of the
// steps the survivors redo leave metrics.jsonl for the discarded file, marked, so that one
// curve remains; what a re-opened generation resumes.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "engine/train/metrics.hpp"
#include "engine/train/replan_restart.hpp"

using namespace holmes;

namespace {

std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Folder {
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("holmes_replan_test_" + std::to_string(::getpid()));
  Folder() {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  ~Folder() { std::filesystem::remove_all(dir); }
};

}  // namespace

TEST_CASE("replan: the rows of redone steps move to the discarded file, marked with the generation") {
  Folder f;
  spec::JobSpec s;
  s.job.output_dir = f.dir.string();
  s.log.metrics = "metrics.jsonl";
  {
    std::ofstream out(f.dir / "metrics.jsonl");
    for (int step = 1; step <= 7; ++step) out << "{\"step\": " << step << ", \"loss\": " << 5 - 0.1 * step << "}\n";
    out << "{\"step\": 7, \"val_loss\": 4.5}\n";
  }
  train::Redo redo;
  redo.from_step = 5;
  redo.steps = 2;
  train::discard_redone_rows(s, redo, 1);
  CHECK(read_all(f.dir / "metrics.jsonl") ==
        "{\"step\": 1, \"loss\": 4.9}\n{\"step\": 2, \"loss\": 4.8}\n{\"step\": 3, \"loss\": 4.7}\n"
        "{\"step\": 4, \"loss\": 4.6}\n{\"step\": 5, \"loss\": 4.5}\n");
  CHECK(train::discarded_metrics_path(s) == (f.dir / "metrics-discarded.jsonl").string());
  const std::string gone = "{\"discarded_by_generation\": 1, \"step\": 6, \"loss\": 4.4}\n"
                           "{\"discarded_by_generation\": 1, \"step\": 7, \"loss\": 4.3}\n"
                           "{\"discarded_by_generation\": 1, \"step\": 7, \"val_loss\": 4.5}\n";
  CHECK(read_all(f.dir / "metrics-discarded.jsonl") == gone);
  // A second re-plan appends; nothing past the checkpoint: nothing moves.
  {
    std::ofstream out(f.dir / "metrics.jsonl", std::ios::app);
    out << "{\"step\": 6, \"loss\": 4.41}\n";
  }
  redo.from_step = 0;
  train::discard_redone_rows(s, redo, 2);
  CHECK(read_all(f.dir / "metrics.jsonl").empty());
  CHECK(read_all(f.dir / "metrics-discarded.jsonl").find("{\"discarded_by_generation\": 2, \"step\": 6, \"loss\": 4.41}") !=
        std::string::npos);
  redo.from_step = 0;
  train::discard_redone_rows(s, redo, 3);  // an empty file stays empty
  CHECK(read_all(f.dir / "metrics.jsonl").empty());
}

TEST_CASE("metrics: rows after a step set aside with a mark, and the last row found (a new leader takes over)") {
  Folder f;
  const std::string path = (f.dir / "metrics.jsonl").string(), side = (f.dir / "metrics-discarded.jsonl").string();
  CHECK(train::last_row_step(path) == 0);  // absent
  CHECK(train::set_aside_rows(path, 3, side, "set_aside_at_step", 4) == 0);
  {
    std::ofstream out(path);
    for (int step : {1, 2, 3, 5, 6}) out << "{\"step\": " << step << ", \"loss\": 4}\n";
  }
  CHECK(train::last_row_step(path) == 6);
  CHECK(train::set_aside_rows(path, 3, side, "set_aside_at_step", 4) == 2);
  CHECK(read_all(path) == "{\"step\": 1, \"loss\": 4}\n{\"step\": 2, \"loss\": 4}\n{\"step\": 3, \"loss\": 4}\n");
  CHECK(read_all(side) == "{\"set_aside_at_step\": 4, \"step\": 5, \"loss\": 4}\n"
                          "{\"set_aside_at_step\": 4, \"step\": 6, \"loss\": 4}\n");
  CHECK(train::last_row_step(path) == 3);  // a gap of step 4 is the caller's to fill
  CHECK(train::set_aside_rows(path, 3, side, "set_aside_at_step", 4) == 0);  // nothing after 3: unchanged
  CHECK(train::set_aside_rows("", 0, side, "x", 1) == 0);  // no metrics file configured
}

TEST_CASE("replan: without a checkpoint of the run the survivors start where the job started, never overwriting") {
  Folder f;
  spec::JobSpec started;
  started.job.output_dir = f.dir.string();
  started.job.overwrite = true;
  started.checkpoint.resume = spec::ResumeMode::kPath;
  started.checkpoint.resume_path = "/somewhere/step-00000100";
  spec::JobSpec survivors = started;
  survivors.parallel.pipeline = spec::kAuto;
  const spec::JobSpec next = train::spec_after_replan(survivors, started);
  CHECK_FALSE(next.job.overwrite);
  CHECK(next.checkpoint.resume == spec::ResumeMode::kPath);
  CHECK(next.checkpoint.resume_path == "/somewhere/step-00000100");
  CHECK(next.parallel.pipeline == spec::kAuto);
  spec::JobSpec plain = started;
  plain.log.metrics = "log.txt";
  CHECK(train::discarded_metrics_path(plain) == (f.dir / "log.txt-discarded").string());
}
