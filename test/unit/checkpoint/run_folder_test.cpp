// A job.output_dir belongs to one run: the claim rules (run_folder.hpp) and retention that
// only ever deletes checkpoints of the run saving.
#include <catch2/catch.hpp>

#include <fstream>

#include "common/errors.hpp"
#include "engine/checkpoint/run_folder.hpp"
#include "engine/spec/run_paths.hpp"
#include "test/support/checkpoint_test_util.hpp"

namespace fs = std::filesystem;
using namespace holmes;
using namespace holmes::checkpoint;
using namespace holmes::test;

namespace {

spec::JobSpec job_in(const std::string& dir) {
  spec::JobSpec s;
  s.job.output_dir = dir;
  return s;
}

void save_of_run(const std::string& ckpt_dir, int64_t step, const std::string& run, int keep = 0) {
  const auto g = small_model();
  FakeShard a(g, 1, 0, 0, -1, 1, 0);
  a.fill();
  auto c = save_context(g, step);
  c.run_id = run;
  c.keep = keep;
  save_checkpoint(ckpt_dir, a.state(), c);
}

std::string refusal(const spec::JobSpec& s, const RunStart& start) {
  try {
    claim_run_folder(s, start, inspect_run_folder(s), "new0000000000000");
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("run folder: retention keeps the newest checkpoints of the saving run and never touches another run's") {
  const std::string root = temp_dir("retention-runs");
  save_of_run(root, 2, "aaaa");
  save_of_run(root, 4, "aaaa");
  save_of_run(root, 3, "bbbb");
  save_of_run(root, 5, "");  // saved before run ids
  fs::create_directories(checkpoint_step_dir(root, 1));  // incomplete, nobody's
  save_of_run(root, 6, "bbbb", /*keep=*/1);
  CHECK(fs::exists(checkpoint_step_dir(root, 2) + "/COMMITTED"));
  CHECK(fs::exists(checkpoint_step_dir(root, 4) + "/COMMITTED"));
  CHECK(fs::exists(checkpoint_step_dir(root, 5) + "/COMMITTED"));
  CHECK(!fs::exists(checkpoint_step_dir(root, 3)));
  CHECK(!fs::exists(checkpoint_step_dir(root, 1)));
  CHECK(fs::exists(checkpoint_step_dir(root, 6) + "/COMMITTED"));
  const auto folders = list_step_folders(root);
  REQUIRE(folders.size() == 4);
  CHECK(folders[0].run_id == "bbbb");
  CHECK(folders[1].run_id.empty());
  CHECK(folders[2].run_id == "aaaa");
  CHECK(open_checkpoint(checkpoint_step_dir(root, 6)).run_id == "bbbb");
}

TEST_CASE("run folder: a fresh start is refused where any run left outputs, allowed in an empty folder") {
  const std::string dir = temp_dir("claim-fresh");
  auto s = job_in(dir);
  RunClaim c = claim_run_folder(s, {}, inspect_run_folder(s), "new0000000000000");
  CHECK(c.run_id == "new0000000000000");
  CHECK(c.remove.empty());
  take_run_folder(s, c);
  // Only run.json so far: a fresh start is still another run.
  CHECK_THAT(refusal(s, {}), Catch::Contains("already holds a run") && Catch::Contains("new0000000000000") &&
                                 Catch::Contains("--resume auto") && Catch::Contains("--overwrite"));
  // An output of a run from before run ids (no run.json) counts as well.
  const std::string old = temp_dir("claim-legacy");
  fs::create_directories(old + "/final");
  std::ofstream(old + "/final/model.bin") << "x";
  CHECK_THAT(refusal(job_in(old), {}), Catch::Contains("run without an id") && Catch::Contains("final weights"));
}

TEST_CASE("run folder: resuming keeps the checkpoint's run, another run's outputs are refused or overwritten") {
  const std::string dir = temp_dir("claim-resume");
  auto s = job_in(dir);
  save_of_run(spec::RunPaths::of(s).checkpoints, 4, "aaaa");
  RunStart resume{.resumed = true, .continues = "aaaa", .source = checkpoint_step_dir(spec::RunPaths::of(s).checkpoints, 4)};
  CHECK(claim_run_folder(s, resume, inspect_run_folder(s), "new0000000000000").run_id == "aaaa");

  RunStart other{.resumed = true, .continues = "cccc", .source = "/elsewhere/step-00000009"};
  CHECK_THAT(refusal(s, other), Catch::Contains("holds another run's outputs") && Catch::Contains("run aaaa") &&
                                    Catch::Contains("continues run cccc"));
  s.job.overwrite = true;
  RunClaim c = claim_run_folder(s, other, inspect_run_folder(s), "new0000000000000");
  CHECK(c.run_id == "cccc");
  REQUIRE(c.remove.size() == 1);
  CHECK(c.remove[0] == checkpoint_step_dir(spec::RunPaths::of(s).checkpoints, 4));
  // Overwriting never deletes the checkpoint being loaded.
  RunStart fine_tune{.resumed = false, .continues = "aaaa", .source = checkpoint_step_dir(spec::RunPaths::of(s).checkpoints, 4)};
  CHECK_THAT(refusal(s, fine_tune), Catch::Contains("would delete") && Catch::Contains("the checkpoint this job loads"));
  take_run_folder(s, c);
  CHECK(!fs::exists(checkpoint_step_dir(spec::RunPaths::of(s).checkpoints, 4)));
}

TEST_CASE("run folder: --resume auto without a checkpoint continues the folder's one run from step 0") {
  const std::string dir = temp_dir("claim-auto");
  auto s = job_in(dir);
  take_run_folder(s, RunClaim{.run_id = "dddd", .remove = {}, .write_record = true});
  std::ofstream(dir + "/metrics.jsonl") << "{}\n";
  RunStart none{.resumed = false, .continues = "", .source = "", .auto_found_none = true};
  CHECK(claim_run_folder(s, none, inspect_run_folder(s), "new0000000000000").run_id == "dddd");
  CHECK_THAT(refusal(s, RunStart{}), Catch::Contains("already holds a run"));
}

TEST_CASE("run folder: output folders that cannot be written are named with their key") {
  const std::string dir = temp_dir("unwritable");
  std::ofstream(dir + "/file") << "x";
  auto s = job_in(dir + "/file");
  try {
    check_output_folders_writable(s);
    FAIL("no error");
  } catch (const UserError& e) {
    CHECK_THAT(e.what(), Catch::Contains("job.output_dir: '" + dir + "/file'") && Catch::Contains("is a file"));
  }
  s = job_in(dir + "/ok");
  s.checkpoint.dir = dir + "/file/ckpt";
  CHECK_THROWS_WITH(check_output_folders_writable(s), Catch::Contains("checkpoint.dir: '" + dir + "/file/ckpt'"));
  s.checkpoint.dir = dir + "/ckpt";
  CHECK_NOTHROW(check_output_folders_writable(s));
  CHECK(fs::is_directory(dir + "/ckpt"));
}

TEST_CASE("run folder: a writer killed in its first save leaves its own run, which --resume auto continues") {
  // run.json and metrics of run eeee, and the step folder of a save that never wrote a manifest.
  const std::string dir = temp_dir("claim-killed-first-save");
  auto s = job_in(dir);
  take_run_folder(s, RunClaim{.run_id = "eeee", .remove = {}, .write_record = true});
  std::ofstream(dir + "/metrics.jsonl") << "{}\n";
  fs::create_directories(checkpoint_step_dir(spec::RunPaths::of(s).checkpoints, 50));
  const RunFolder folder = inspect_run_folder(s);
  for (const auto& o : folder.outputs) CHECK(o.run_id == "eeee");
  RunStart none{.resumed = false, .continues = "", .source = "", .auto_found_none = true, .resume_auto = true};
  CHECK(claim_run_folder(s, none, folder, "new0000000000000").run_id == "eeee");
}

TEST_CASE("run folder: a refusal does not offer --resume auto to a run that was given it") {
  // Outputs of two runs: --resume auto finds no checkpoint of one run to continue.
  const std::string dir = temp_dir("claim-auto-two-runs");
  auto s = job_in(dir);
  take_run_folder(s, RunClaim{.run_id = "ffff", .remove = {}, .write_record = true});
  save_of_run(spec::RunPaths::of(s).checkpoints, 2, "gggg");
  fs::remove(checkpoint_step_dir(spec::RunPaths::of(s).checkpoints, 2) + "/COMMITTED");
  s.checkpoint.resume = spec::ResumeMode::kAuto;
  RunStart none{.resumed = false, .continues = "", .source = "", .auto_found_none = true, .resume_auto = true};
  const std::string msg = refusal(s, none);
  CHECK_THAT(msg, Catch::Contains("--resume auto found no complete checkpoint") && Catch::Contains("--overwrite") &&
                      !Catch::Contains("continue it with --resume auto"));
  // A fresh start that did not ask for it is offered it.
  CHECK_THAT(refusal(s, RunStart{}), Catch::Contains("continue it with --resume auto"));
}
