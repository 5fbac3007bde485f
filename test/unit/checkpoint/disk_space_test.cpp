// Free-space checks before training (disk_space.hpp) and the sizes they use: one
// checkpoint's files and the final weights, tied to files really written.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <filesystem>

#include "engine/checkpoint/disk_space.hpp"
#include "engine/checkpoint/model_file.hpp"
#include "test/support/checkpoint_test_util.hpp"
#include "model/llama/llama.hpp"

namespace fs = std::filesystem;
using namespace holmes;
using namespace holmes::checkpoint;
using namespace holmes::test;

TEST_CASE("disk space: one rank's priced checkpoint equals the folder it saves") {
  const auto g = small_model();
  FakeShard a(g, 1, 0, 0, -1, 1, 0);
  a.fill();
  const std::string root = temp_dir("space_single");
  const SaveContext c = save_context(g, 12);
  const uint64_t priced = checkpoint_bytes_of_rank(std::vector<ShardState>{a.state()}, c);
  save_checkpoint(root, a.state(), c);
  uint64_t written = 0;
  for (const auto& e : fs::directory_iterator(checkpoint_step_dir(root, 12))) written += e.file_size();
  INFO("priced " << priced << ", written " << written);
  CHECK(priced >= written);
  CHECK(priced - written <= 1);
  // The shard file alone is header + params and both moments in fp32.
  CHECK(fs::file_size(checkpoint_step_dir(root, 12) + "/rank-00000.bin") == 64 + 12 * a.params.size());
}

TEST_CASE("disk space: the final weights' priced size equals the file written") {
  for (auto g : {small_model(), model::llama::config(2, 32, 4, 2, 0, 100, 16)}) {
    g.finalize();
    const model::ParamLayout layout(g);
    std::vector<float> params(layout.size(), 0.5f);
    const std::string path = temp_dir("space_final") + "/final/model.bin";
    save_model_weights(path, g, params.data(), params.size());
    CHECK(fs::file_size(path) == model_weights_bytes(g, params.size()));
    CHECK(!fs::exists(path + ".tmp"));
  }
}

TEST_CASE("disk space: new checkpoints held at once are keep + 1, at most the saves made, less those there") {
  CHECK(checkpoints_to_hold(0, 100, 10, 3) == 4);  // a new one is written before the oldest goes
  CHECK(checkpoints_to_hold(0, 20, 10, 3) == 2);   // only two saves
  CHECK(checkpoints_to_hold(0, 25, 10, 3) == 3);   // 10, 20 and the last step
  CHECK(checkpoints_to_hold(0, 100, 0, 3) == 1);   // only at the end
  CHECK(checkpoints_to_hold(0, 100, 1, 1) == 2);
  // Resumed at step 80 with 3 of the run's checkpoints on disk: one more at a time.
  CHECK(checkpoints_to_hold(80, 100, 10, 3, 3) == 1);
  // With one there, saves at 90 and 100: both stay beside it (keep 3).
  CHECK(checkpoints_to_hold(80, 100, 10, 3, 1) == 2);
  // keep lowered below what is there: still room for the one being written.
  CHECK(checkpoints_to_hold(80, 100, 10, 1, 5) == 1);
  CHECK(checkpoints_to_hold(85, 100, 10, 3, 0) == 2);  // 90 and 100
  CHECK(checkpoints_to_hold(100, 100, 10, 3, 3) == 0);  // nothing left to train
}

TEST_CASE("disk space: too little room for one checkpoint is an error naming folder, sizes and ways out") {
  SpaceNeed need{.checkpoint = 5'000'000, .world = 2, .files = 4, .final_weights = 1'000'000, .retained = 4, .keep = 3};
  const FolderSpace ckpt{"checkpoint.dir", "/scratch/ckpt", 5'500'000, 7};
  const FolderSpace out_same{"job.output_dir", "/scratch/out", 5'500'000, 7};
  const FolderSpace out_other{"job.output_dir", "/home/out", 900'000, 8};

  // Same file system: checkpoint + final weights = 6 MB > 5.5 MB.
  SpaceVerdict v = judge_space(need, ckpt, &out_same);
  CHECK_THAT(v.error, Catch::Contains("checkpoint.dir: '/scratch/ckpt'") &&
                          Catch::Contains("5.5 MB (5500000 bytes) free") &&
                          Catch::Contains("5.0 MB (5000000 bytes) (2 shard files") &&
                          Catch::Contains("final weights are 1.0 MB (1000000 bytes)") &&
                          Catch::Contains("needed at least 6.0 MB (6000000 bytes)") &&
                          Catch::Contains("--set checkpoint.dir=DIR") && Catch::Contains("smaller model"));
  // Ranks other than 0 check the checkpoint only: 5 MB fits, 4 x 5 MB is a warning (rank 0 prints it).
  v = judge_space(need, ckpt, nullptr);
  CHECK(v.error.empty());
  REQUIRE(v.warnings.size() == 1);
  CHECK_THAT(v.warnings[0], Catch::Contains("enough for one checkpoint but not for the 4 new checkpoints") &&
                                Catch::Contains("checkpoint.keep 3") && Catch::Contains("20.0 MB"));
  // Another file system for the outputs: the final weights must fit there.
  v = judge_space(need, ckpt, &out_other);
  CHECK_THAT(v.error, Catch::Contains("job.output_dir: '/home/out'") && Catch::Contains("900.0 kB (900000 bytes) free") &&
                          Catch::Contains("needed at least 1.0 MB (1000000 bytes)"));
  // Room for everything: nothing to say.
  need.retained = 1;
  CHECK(judge_space(need, {"checkpoint.dir", "/big", 6'000'000, 7}, &out_same).warnings.empty());
  CHECK(judge_space(need, {"checkpoint.dir", "/big", 6'000'000, 7}, &out_same).error.empty());
}

TEST_CASE("disk space: every file may end in a partial block of the file system") {
  // 4 files of a 1000-byte checkpoint on 4096-byte blocks: up to 4 x 4096 more; the final
  // weights (2 files) up to 2 x 4096 more.
  const SpaceNeed need{.checkpoint = 1000, .world = 2, .files = 4, .final_weights = 100, .retained = 1, .keep = 3};
  const uint64_t needed = 1000 + 4 * 4096 + 100 + 2 * 4096;
  const FolderSpace out{"job.output_dir", "/o", 0, 7, 4096};
  CHECK(judge_space(need, {"checkpoint.dir", "/c", needed, 7, 4096}, &out).error.empty());
  const SpaceVerdict v = judge_space(need, {"checkpoint.dir", "/c", needed - 1, 7, 4096}, &out);
  CHECK_THAT(v.error, Catch::Contains(fmt::format("needed at least {}", bytes_text(needed))));
}

TEST_CASE("disk space: a folder not created yet is measured at its nearest parent") {
  const std::string root = temp_dir("space_parent");
  const FolderSpace here = folder_space("checkpoint.dir", root);
  const FolderSpace later = folder_space("checkpoint.dir", root + "/not/yet");
  CHECK(later.device == here.device);
  CHECK(later.free > 0);
  CHECK(later.dir == root + "/not/yet");
}
