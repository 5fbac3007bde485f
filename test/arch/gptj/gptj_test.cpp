// The test-only architecture gptj (gptj.hpp) through everything an architecture must pass, with
// nothing outside this folder knowing it: the registry's counts agree with its tensors, its
// gradients agree with finite differences, every activation policy and split backward gives
// the gradients of keeping everything bit for bit, tensor-parallel shards give the single
// model's, a job spec selects it (and refuses the keys it does not read), and the real
// training loop trains it on the CPU, checkpoints it and resumes it bit for bit.
#include <catch2/catch.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "engine/checkpoint/hf_format.hpp"
#include "engine/checkpoint/model_file.hpp"
#include "engine/plan/plan.hpp"
#include "engine/spec/load.hpp"
#include "engine/spec/model_config.hpp"
#include "engine/train/run.hpp"
#include "model/architecture.hpp"
#include "model/counts.hpp"
#include "model/param_layout.hpp"
#include "test/arch/gptj/gptj.hpp"
#include "test/unit/model/model_checks.hpp"

namespace fs = std::filesystem;
using namespace holmes;
using namespace holmes::model;
using namespace holmes::model::test;

// The one registration: the registry's extension point, before any test reads a spec or
// builds a model.
static const bool kRegistered = (register_architecture(holmes::test::gptj::make_architecture()), true);

namespace {

GptConfig small() { return holmes::test::gptj::config(2, 24, 4, 37, 9); }

}  // namespace

TEST_CASE("gptj: registered beside the built-in architectures, its counts are its tensors'", "[arch][gptj]") {
  REQUIRE(kRegistered);
  CHECK(architecture_names() == std::vector<std::string>{"gpt2", "llama", "gptj"});
  for (int tp : {1, 2}) {
    const GptConfig whole = holmes::test::gptj::config(3, 32, 4, 300, 16);
    const GptConfig shard = whole.shard(tp, 0);
    const ParamLayout layout(shard);
    int64_t params = 0, gemm = 0;
    for (const ParamTensor& t : layout.tensors())
      if (t.layer == 0) {
        params += static_cast<int64_t>(t.numel);
        if (t.shape.size() == 2) gemm += static_cast<int64_t>(t.numel);
      }
    CAPTURE(tp);
    CHECK(block_counts(shard).params == params);
    CHECK(block_counts(shard).gemm_weights == gemm);
    GptConfig padded = whole;
    padded.padded_vocab = shard.padded_vocab;
    padded.finalize();
    CHECK(total_params(whole, tp) == static_cast<int64_t>(ParamLayout(padded).size()));
  }
  // Untied head by default: the head is its own tensor; no learned positions.
  const ParamLayout layout(small());
  CHECK(layout.find("lm_head.weight") != nullptr);
  CHECK(layout.find("transformer.h.1.attn.q_proj.weight") != nullptr);
  CHECK(position_params(small()) == 0);
}

TEST_CASE("gptj: whole-model gradients against finite differences, odd sizes", "[arch][gptj][gradcheck]") {
  check_model(small(), 2, 7, {"transformer.h.0.attn.k_proj.weight", "transformer.h.1.mlp.fc_in.bias", "lm_head.weight"},
              3e-3f);
}

TEST_CASE("gptj: gradients with a tied head and aligned sizes", "[arch][gptj][gradcheck]") {
  GptConfig c = holmes::test::gptj::config(2, 32, 4, 128, 8);
  c.tie_embeddings = true;
  c.finalize();
  check_model(c, 2, 8, {"transformer.wte.weight"}, 3e-3f);
}

TEST_CASE("gptj: every recompute mode and the split backward give none's gradients bit for bit", "[arch][gptj]") {
  model::Backend backend = backends::make_backend(backends::Device::kCpu);
  SECTION("whole model") {
    check_policies([&](const ActivationPolicy& p) {
      std::vector<std::unique_ptr<Gpt>> g;
      g.push_back(std::make_unique<Gpt>(small(), backend, kB, kT, nullptr, kMicro, holmes::DType::kF32, p));
      return g;
    });
  }
  SECTION("two pipeline stages") {
    check_policies([&](const ActivationPolicy& p) {
      std::vector<std::unique_ptr<Gpt>> g;
      g.push_back(std::make_unique<Gpt>(small().shard(1, 0, 0, 1), backend, kB, kT, nullptr, kMicro,
                                        holmes::DType::kF32, p));
      g.push_back(std::make_unique<Gpt>(small().shard(1, 0, 1), backend, kB, kT, nullptr, kMicro, holmes::DType::kF32, p));
      return g;
    });
  }
}

TEST_CASE("gptj: tensor-parallel shards (one sum forward, one backward) match tp=1", "[arch][gptj][tp]") {
  check_tp_config(2, small());
  check_tp_config(4, holmes::test::gptj::config(1, 32, 4, 100, 9));
}

namespace {

struct Run {
  fs::path dir;
  std::map<int, double> losses;  // step -> loss, from metrics.jsonl
};

// A small gptj job of `steps` through the real single-process training loop into `dir`.
Run train_job(const fs::path& dir, int steps, std::vector<std::string> sets = {}) {
  std::vector<std::string> all = {"model.arch=gptj",       "model.layers=2",          "model.hidden=32",
                                  "model.heads=4",         "model.max_seq_len=32",    "model.rope_theta=10000",
                                  "train.seq_len=32",      "train.micro_batch=4",     "train.global_batch=8",
                                  "train.lr=3e-3",         "train.warmup_steps=2",    "train.eval_interval=0",
                                  "log.interval=1",        "checkpoint.interval=4",   "checkpoint.keep=10",
                                  "data.synthetic.tokens=100000", "cluster.device_tflops=1",
                                  "job.output_dir=" + dir.string(), "train.steps=" + std::to_string(steps)};
  all.insert(all.end(), sets.begin(), sets.end());
  const spec::JobSpec spec = spec::load_job_spec("", all).spec;
  REQUIRE(holmes::train::run_training(spec) == 0);
  Run r{dir, {}};
  std::ifstream in(dir / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const auto row = nlohmann::json::parse(line);
    if (row.contains("loss") && row.contains("step")) r.losses[row["step"].get<int>()] = row["loss"].get<double>();
  }
  return r;
}

std::string bytes_of(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("gptj: trains through the real loop, checkpoints and resumes bit for bit", "[arch][gptj][train]") {
  const fs::path tmp = fs::temp_directory_path() / fmt::format("holmes-gptj-{}", ::getpid());
  fs::remove_all(tmp);
  const Run ref = train_job(tmp / "ref", 16);
  REQUIRE(ref.losses.size() == 16);
  // It learns: the last steps' loss is well below the first's (a uniform guess is ln 257 = 5.55).
  CHECK(ref.losses.at(1) > 5.0);
  CHECK(ref.losses.at(16) < ref.losses.at(1) - 1.0);
  // The weights file names the architecture (version 4) and reads back as it was trained.
  const checkpoint::ModelWeights w = checkpoint::load_model_weights((tmp / "ref/final/model.bin").string());
  CHECK(w.config.arch == "gptj");
  CHECK(w.config.differences(holmes::test::gptj::config(2, 32, 4, 257, 32)) == "");
  // Resumed from the step-8 checkpoint into another folder: steps 9-16 as the uninterrupted run.
  const Run resumed = train_job(tmp / "resumed", 16, {"checkpoint.resume=" + (tmp / "ref/checkpoints/step-00000008").string()});
  for (int step = 9; step <= 16; ++step) {
    CAPTURE(step);
    REQUIRE(resumed.losses.count(step) == 1);
    CHECK(resumed.losses.at(step) == ref.losses.at(step));  // bit for bit
  }
  CHECK(resumed.losses.count(8) == 0);
  CHECK(bytes_of(tmp / "resumed/final/model.bin") == bytes_of(tmp / "ref/final/model.bin"));
  // No Hugging Face map: export says so, naming the architecture.
  CHECK_THROWS_WITH(checkpoint::to_hf(w.config, w.params), Catch::Contains("model.arch gptj has no Hugging Face"));
  fs::remove_all(tmp);
}

TEST_CASE("gptj: a job spec selects it and refuses the keys it does not read", "[arch][gptj][spec]") {
  const spec::JobSpec s = spec::load_job_spec("", {"model.arch=gptj", "model.layers=2", "model.hidden=32",
                                                   "model.heads=4", "model.tie_embeddings=true"}).spec;
  const GptConfig c = spec::model_config(s.model);
  CHECK(c.arch == "gptj");
  CHECK(c.tie_embeddings);
  CHECK(c.rope_theta == 500000);  // the spec's default, which gptj reads
  try {
    spec::load_job_spec("", {"model.arch=gptj", "model.layers=2", "model.hidden=32", "model.heads=4",
                             "model.kv_heads=2"});
    FAIL("model.kv_heads was accepted for gptj");
  } catch (const UserError& e) {
    CHECK_THAT(e.what(), Catch::Contains("model.kv_heads applies to model.arch llama only, but model.arch = gptj"));
  }
  try {
    spec::load_job_spec("", {"model.arch=gptj", "model.layers=2", "model.hidden=36", "model.heads=4"});
    FAIL("an odd head size was accepted for gptj");
  } catch (const UserError& e) {
    CHECK_THAT(e.what(), Catch::Contains("must be even for gptj"));
  }
}

TEST_CASE("gptj: the planner prices it from its counts (one tensor-parallel sum each way per block)",
          "[arch][gptj][plan]") {
  spec::JobSpec s = spec::load_job_spec("", {"model.arch=gptj", "model.layers=4", "model.hidden=64", "model.heads=4",
                                             "model.rope_theta=10000", "parallel.tensor=2", "parallel.pipeline=2",
                                             "parallel.data=1", "cluster.device_tflops=1"}).spec;
  topo::ClusterTopology t;
  topo::NodeReport n;
  n.hostname = "box";
  n.devices.kind = "cpu";
  n.devices.count = 4;
  n.devices.cores = 8;
  t.nodes.push_back(n);
  t.islands.push_back(topo::Island{0, topo::NicKind::kEthernet, "", {0}, 0});
  t.island_of = {0};
  const plan::Plan p = plan::make_plan(s, t);
  const GptConfig whole = spec::model_config(s.model);
  CHECK(p.model == "gptj L=4 C=64 NH=4 V=257");  // its options: no KVH or F, an untied head
  CHECK(p.params_model == model_params(whole));
  CHECK(p.params_total == total_params(whole, 2));
  CHECK(block_counts(whole).tp_sums == 2);
  CHECK(p.estimate.tp_comm_s > 0);
}
