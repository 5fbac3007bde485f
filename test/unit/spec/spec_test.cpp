// Job-spec loading: defaults, overrides, origins, the schema's own consistency, and the
// docs table staying in sync with the schema. Bad specs through the binary are covered by
// test/integration/bad_specs.sh.
#include <catch2/catch.hpp>
#include <fstream>
#include <set>
#include <sstream>

#include "common/errors.hpp"
#include "engine/spec/load.hpp"
#include "engine/spec/schema.hpp"
#include "engine/spec/suggest.hpp"
#include "engine/spec/validate.hpp"

using namespace holmes;
using namespace holmes::spec;

namespace {

std::string write_temp(const std::string& name, const std::string& text) {
  std::string path = "/tmp/holmes_spec_test_" + name;
  std::ofstream(path) << text;
  return path;
}

const char* kMinimal = "model:\n  layers: 2\n  hidden: 32\n  heads: 4\ntrain:\n  steps: 10\n";

// Runs the loader and returns the issues it throws (empty when it loads).
std::vector<ConfigIssue> issues_of(const std::string& file, const std::vector<std::string>& sets = {}) {
  try {
    load_job_spec(file, sets);
  } catch (const ConfigError& e) {
    return e.issues();
  }
  return {};
}

}  // namespace

TEST_CASE("the embedded default job loads and is valid") {
  auto loaded = load_job_spec("", {});
  CHECK(loaded.spec.model.layers > 0);
  CHECK(loaded.spec.train.steps > 0);
  CHECK(loaded.spec.data.source == spec::DataSource::kSynthetic);
  CHECK(loaded.spec.global_batch_ok(1));
  CHECK(loaded.origin.at("model.layers").source == "<embedded default>");
}

TEST_CASE("the embedded default is configs/default.yaml") {
  std::ifstream in(std::string(HOLMES_SOURCE_DIR) + "/configs/default.yaml");
  std::stringstream ss;
  ss << in.rdbuf();
  CHECK(ss.str() == embedded_default_yaml());
}

TEST_CASE("a minimal file gets defaults, and their origin says so") {
  auto path = write_temp("minimal.yaml", kMinimal);
  auto loaded = load_job_spec(path, {});
  CHECK(loaded.spec.model.hidden == 32);
  CHECK(loaded.spec.train.micro_batch == 8);
  CHECK(loaded.spec.parallel.partition.kind == holmes::spec::PartitionKind::kAuto);
  CHECK(loaded.origin.at("train.micro_batch").source == "default");
  CHECK(loaded.origin.at("model.hidden").source == path);
  CHECK(loaded.origin.at("model.hidden").line == 3);
}

TEST_CASE("set overrides (--set) file values and records the command line as origin") {
  auto path = write_temp("set.yaml", kMinimal);
  auto loaded = load_job_spec(path, {"train.steps=99", "parallel.partition=[1, 1]", "parallel.pipeline=2",
                                     "parallel.data=auto", "job.name=run a", "train.lr=1e-3"});
  CHECK(loaded.spec.train.steps == 99);
  CHECK(loaded.spec.parallel.partition.kind == spec::PartitionKind::kList);
  CHECK(loaded.spec.parallel.partition.layers == std::vector<int>{1, 1});
  CHECK(loaded.spec.parallel.data == kAuto);
  CHECK(loaded.spec.job.name == "run a");
  CHECK(loaded.spec.train.lr == Approx(1e-3));
  CHECK(loaded.origin.at("train.steps").source == "--set");
  // The last --set of a key wins.
  CHECK(load_job_spec(path, {"train.steps=5", "train.steps=6"}).spec.train.steps == 6);
}

TEST_CASE("a partition list fixes an auto pipeline degree") {
  auto path = write_temp("part.yaml", std::string(kMinimal) + "parallel:\n  pipeline: auto\n  partition: [1, 1]\n");
  CHECK(load_job_spec(path, {}).spec.parallel.pipeline == 2);
}

TEST_CASE("a pipeline degree implied by the partition names the partition as its origin") {
  // partition on line 9, pipeline: auto on line 8: --print-config names line 9, not 8.
  auto path =
      write_temp("part_origin.yaml", std::string(kMinimal) + "parallel:\n  pipeline: auto\n  partition: [1, 1]\n");
  auto loaded = load_job_spec(path, {});
  const Origin& o = loaded.origin.at("parallel.pipeline");
  CHECK(o.source == path);
  CHECK(o.line == 9);
  CHECK(o.derived_from == "parallel.partition");
  CHECK_THAT(print_resolved(loaded), Catch::Contains("pipeline: 2") &&
                                         Catch::Contains(path + ":9 (from parallel.partition)"));
  // The list given with --set: the degree comes from the command line.
  auto from_set = load_job_spec(path, {"parallel.partition=[1,1]"});
  CHECK(from_set.origin.at("parallel.pipeline").to_string() == "--set (from parallel.partition)");
  // An explicit degree keeps its own origin.
  auto both = load_job_spec(path, {"parallel.pipeline=2"});
  CHECK(both.origin.at("parallel.pipeline").to_string() == "--set");
}

TEST_CASE("a flag that stands for a key is named as the origin of its value and of its problems") {
  auto path = write_temp("flags.yaml", kMinimal);
  auto loaded = load_job_spec(path, {}, {{"--resume", "checkpoint.resume=auto"}});
  CHECK(loaded.origin.at("checkpoint.resume").to_string() == "--resume");
  CHECK_THAT(print_resolved(loaded), Catch::Contains("# --resume"));
  try {
    load_job_spec(path, {}, {{"--weights-only", "checkpoint.weights_only=true"}});
    FAIL("--weights-only without a checkpoint to load was accepted");
  } catch (const ConfigError& e) {
    REQUIRE(e.issues().size() == 1);
    CHECK(e.issues()[0].file == "--weights-only");
    CHECK_THAT(e.issues()[0].message, Catch::Contains("checkpoint.resume = none (default)") &&
                                          Catch::Contains("--resume auto"));
  }
}

TEST_CASE("an integer key accepts only what its type holds, and says so") {
  auto issues = issues_of(write_temp("int_bound.yaml", kMinimal), {"train.micro_batch=3000000000"});
  REQUIRE(issues.size() == 1);
  CHECK_THAT(issues[0].message, Catch::Contains("3000000000") && Catch::Contains("[1, 2147483647]"));
  auto degree = issues_of(write_temp("degree_bound.yaml", kMinimal), {"parallel.data=2000000"});
  REQUIRE(degree.size() == 1);
  CHECK_THAT(degree[0].message, Catch::Contains("2000000") && Catch::Contains("[1, 1000000] or auto"));
}

TEST_CASE("the straggler keys: defaults, and out-of-range values named with what is accepted") {
  auto path = write_temp("stragglers.yaml", kMinimal);
  const auto loaded = load_job_spec(path, {}, {});
  CHECK(loaded.spec.log.straggler_threshold == 0.2);
  CHECK(loaded.spec.log.straggler_lines == 3);
  auto issues = issues_of(path, {"log.straggler_threshold=0", "log.straggler_lines=0"});
  REQUIRE(issues.size() == 2);
  CHECK(issues[0].path == "log.straggler_threshold");
  CHECK_THAT(issues[0].message, Catch::Contains("value 0 is out of range") && Catch::Contains("number > 0 and <= 100"));
  CHECK(issues[1].path == "log.straggler_lines");
  CHECK_THAT(issues[1].message, Catch::Contains("[1, 1000000]"));
  CHECK(issues_of(path, {"log.straggler_threshold=0.5", "log.straggler_lines=1"}).empty());
}

TEST_CASE("the warm-up in tokens or in steps, not both") {
  auto path = write_temp("warmup_tokens.yaml", kMinimal);
  auto issues = issues_of(path, {"train.warmup_tokens=4096", "train.warmup_steps=5"});
  REQUIRE(issues.size() == 1);
  CHECK(issues[0].path == "train.warmup_tokens");
  CHECK_THAT(issues[0].message, Catch::Contains("4096") && Catch::Contains("train.warmup_steps = 5"));
  CHECK(issues_of(path, {"train.warmup_tokens=4096", "train.decay_tokens=100000"}).empty());
}

TEST_CASE("every problem is reported, each with its key and line") {
  auto path = write_temp("many.yaml",
                         "model:\n  layers: 2\n  hidden: 30\n  heads: 4\n  colour: red\ntrain:\n  steps: -1\n");
  auto issues = issues_of(path);
  REQUIRE(issues.size() == 2);
  CHECK(issues[0].path == "model.colour");
  CHECK(issues[0].line == 5);
  CHECK(issues[1].path == "train.steps");
  CHECK(issues[1].line == 7);
  // Cross-field checks run once every field converted (unknown keys aside): hidden 30 % heads 4.
  auto fixed = issues_of(path, {"train.steps=3"});
  REQUIRE(fixed.size() == 2);
  CHECK(fixed[0].path == "model.colour");
  CHECK(fixed[1].path == "model.hidden");
  CHECK(fixed[1].line == 3);
}

TEST_CASE("cross-field problems are all reported together") {
  auto path = write_temp("cross.yaml", "model:\n  layers: 2\n  hidden: 30\n  heads: 4\n  max_seq_len: 16\n"
                                       "train:\n  steps: 10\n  seq_len: 32\n  micro_batch: 3\n  global_batch: 8\n"
                                       "parallel:\n  tensor: 3\n");
  auto issues = issues_of(path);
  std::vector<std::string> paths;
  for (const auto& i : issues) paths.push_back(i.path);
  CHECK(paths == std::vector<std::string>{"model.hidden", "parallel.tensor", "train.global_batch", "train.seq_len"});
  CHECK(issues[1].line == 12);
}

TEST_CASE("did you mean: nearest key by edit distance") {
  CHECK(edit_distance("stpes", "steps") == 1);  // adjacent swap
  CHECK(edit_distance("", "abc") == 3);
  CHECK(nearest("trian", children_of("")) == "train");
  CHECK(nearest("micro_bach", children_of("train")) == "micro_batch");
  CHECK(nearest("zzzzzz", children_of("train")).empty());
}

TEST_CASE("schema: every key is unique, has a doc, and its default converts") {
  std::set<std::string> seen;
  for (const auto& f : schema()) {
    INFO(f.path);
    CHECK(seen.insert(f.path).second);
    CHECK(!f.doc.empty());
    CHECK(!is_group(f.path));
    if (!f.required) {
      JobSpec s;
      CHECK(f.apply(s, YAML::Load(f.default_yaml.empty() ? "\"\"" : f.default_yaml)).empty());
    }
  }
  CHECK(children_of("") == std::vector<std::string>{"job", "model", "data", "train", "parallel", "cluster",
                                                     "checkpoint", "log"});
}

TEST_CASE("print-config round-trips: its output loads to the same spec") {
  auto path = write_temp("round.yaml", kMinimal);
  auto a = load_job_spec(path, {"parallel.partition=[1,1]", "parallel.pipeline=2", "job.name=x \"y\""});
  std::string printed = print_resolved(a);
  CHECK(printed.find("# --set") != std::string::npos);
  CHECK(printed.find("# default") != std::string::npos);
  auto again = load_job_spec(write_temp("round2.yaml", printed), {});
  CHECK(print_resolved(again).find("partition: [1, 1]") != std::string::npos);
  CHECK(again.spec.job.name == "x \"y\"");
  CHECK(again.spec.train.lr == a.spec.train.lr);
  CHECK(again.spec.parallel.pipeline == 2);
}

TEST_CASE("docs/job-spec.md documents every key") {
  std::ifstream in(std::string(HOLMES_SOURCE_DIR) + "/docs/job-spec.md");
  REQUIRE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  std::string doc = ss.str();
  for (const auto& f : schema()) {
    INFO(f.path);
    CHECK(doc.find("`" + f.path + "`") != std::string::npos);
  }
}

TEST_CASE("a missing file is a user error naming it") {
  try {
    load_job_spec("/nonexistent/job.yaml", {});
    FAIL("no error");
  } catch (const ConfigError&) {
    FAIL("wrong error type");
  } catch (const UserError& e) {
    CHECK(std::string(e.what()).find("/nonexistent/job.yaml") != std::string::npos);
  }
}

TEST_CASE("model.arch llama: its keys load, default where not given, and configs/llama-tiny.yaml is valid") {
  auto loaded = load_job_spec(std::string(HOLMES_SOURCE_DIR) + "/configs/llama-tiny.yaml", {});
  const ModelSection& m = loaded.spec.model;
  CHECK(m.arch == "llama");
  CHECK(m.kv_heads == 2);
  CHECK(m.resolved_kv_heads() == 2);
  CHECK(m.ffn_hidden == 384);
  CHECK(m.rope_theta == 10000);
  CHECK_FALSE(m.tie_embeddings);
  auto path = write_temp("llama_min.yaml", std::string(kMinimal) + "");
  auto d = load_job_spec(path, {"model.arch=llama"});
  CHECK(d.spec.model.arch == "llama");
  CHECK(d.spec.model.resolved_kv_heads() == 4);  // 0 = heads
  CHECK(d.spec.model.rope_theta == 500000);
  CHECK(d.spec.model.norm_eps == 1e-5);
  CHECK(d.origin.at("model.arch").source == "--set");
  CHECK(load_job_spec(path, {}).spec.model.arch == "gpt2");  // the default
}

TEST_CASE("model.arch and the llama keys are validated with file:line and what is accepted") {
  auto path = write_temp("llama_bad.yaml", "model:\n  arch: llama\n  layers: 2\n  hidden: 96\n  heads: 8\n"
                                          "  kv_heads: 3\ntrain:\n  steps: 10\n");
  auto issues = issues_of(path);
  REQUIRE(issues.size() == 1);
  CHECK(issues[0].path == "model.kv_heads");
  CHECK(issues[0].line == 6);
  CHECK_THAT(issues[0].message, Catch::Contains("model.kv_heads = 3 must divide model.heads = 8") &&
                                    Catch::Contains("accepted: a divisor of 8"));
  // tp must divide the key/value heads; the head size must be even for rotary embeddings.
  issues = issues_of(path, {"model.kv_heads=2", "parallel.tensor=4"});
  REQUIRE(issues.size() == 1);
  CHECK(issues[0].path == "parallel.tensor");
  CHECK_THAT(issues[0].message, Catch::Contains("parallel.tensor = 4 must divide the key/value heads model.kv_heads = 2"));
  issues = issues_of(path, {"model.kv_heads=0", "model.hidden=40"});  // HS = 5
  REQUIRE(issues.size() == 1);
  CHECK_THAT(issues[0].message, Catch::Contains("must be even for llama"));
  issues = issues_of(path, {"model.kv_heads=4", "model.ffn_hidden=250", "parallel.tensor=4"});
  REQUIRE(issues.size() == 1);
  CHECK_THAT(issues[0].message, Catch::Contains("model.ffn_hidden = 250 must be a multiple of parallel.tensor = 4"));
  issues = issues_of(path, {"model.arch=mamba"});
  REQUIRE(issues.size() == 1);
  CHECK(issues[0].path == "model.arch");
  CHECK_THAT(issues[0].message, Catch::Contains("'mamba'") && Catch::Contains("gpt2, llama"));
  issues = issues_of(path, {"model.rope_theta=0"});
  REQUIRE(!issues.empty());
  CHECK(issues[0].path == "model.rope_theta");
}

TEST_CASE("model.arch gpt2 refuses a llama key set to anything but its default, and round-trips --print-config") {
  auto path = write_temp("gpt2_kv.yaml", std::string(kMinimal));
  auto issues = issues_of(path, {"model.kv_heads=2"});
  REQUIRE(issues.size() == 1);
  CHECK(issues[0].path == "model.kv_heads");
  CHECK_THAT(issues[0].message, Catch::Contains("applies to model.arch llama only"));
  CHECK(issues_of(path, {"model.tie_embeddings=false", "model.rope_theta=500000"}).empty());  // defaults: harmless
  auto printed = write_temp("gpt2_printed.yaml", print_resolved(load_job_spec(path, {})));
  CHECK(load_job_spec(printed, {}).spec.model.arch == "gpt2");
}

TEST_CASE("checkpoint.init_from excludes a checkpoint.resume folder, and goes with resume auto") {
  auto path = write_temp("init_from.yaml", std::string(kMinimal));
  auto issues = issues_of(path, {"checkpoint.init_from=hf", "checkpoint.resume=runs/x/checkpoints/step-00000010"});
  REQUIRE(issues.size() == 1);
  CHECK(issues[0].path == "checkpoint.init_from");
  CHECK_THAT(issues[0].message, Catch::Contains("checkpoint.init_from = hf") &&
                                    Catch::Contains("checkpoint.resume = runs/x/checkpoints/step-00000010"));
  CHECK(issues_of(path, {"checkpoint.init_from=hf", "checkpoint.resume=auto"}).empty());
  CHECK(load_job_spec(path, {"checkpoint.init_from=hf"}).spec.checkpoint.init_from == "hf");
}

TEST_CASE("parallel.elastic: sync and diloco replicas and one replica accepted, overlap and interleaved refused") {
  // The problems (key: message) a job of `replicas` has with elastic on and not without it.
  auto keys = [](int replicas, OuterMode outer, auto&& change) {
    JobSpec s;
    s.model.layers = 4;
    s.parallel.replicas = replicas;
    s.parallel.outer = outer;
    s.parallel.elastic = true;
    s.train.global_batch = 12;
    change(s);
    auto text = [](const JobSpec& j) {
      std::set<std::string> out;
      for (const Problem& p : cross_field_problems(j)) out.insert(p.key + ": " + p.message);
      return out;
    };
    JobSpec plain = s;
    plain.parallel.elastic = false;
    std::set<std::string> out;
    const std::set<std::string> without = text(plain);
    for (const std::string& p : text(s))
      if (!without.count(p)) out.insert(p);
    return out;
  };
  auto none = [](JobSpec&) {};
  CHECK(keys(3, OuterMode::kSync, none).empty());
  CHECK(keys(3, OuterMode::kDiloco, none).empty());
  CHECK(keys(1, OuterMode::kSync, none).empty());  // one pipeline, re-planned on the surviving nodes
  const auto overlap = keys(3, OuterMode::kDiloco, [](JobSpec& s) { s.parallel.outer_overlap = 1; });
  REQUIRE(overlap.size() == 1);
  CHECK_THAT(*overlap.begin(), Catch::StartsWith("parallel.elastic: ") && Catch::Contains("outer_overlap = 1") &&
                                   Catch::Contains("accepted"));
  const auto interleaved = keys(3, OuterMode::kSync, [](JobSpec& s) {
    s.parallel.schedule = Schedule::kInterleaved;
    s.parallel.pipeline = 2;
    s.parallel.virtual_stages = 2;
  });
  REQUIRE(interleaved.size() == 1);
  CHECK_THAT(*interleaved.begin(), Catch::StartsWith("parallel.elastic: ") && Catch::Contains("interleaved") &&
                                       Catch::Contains("accepted"));
  const auto quorum = keys(3, OuterMode::kSync, [](JobSpec& s) { s.parallel.min_replicas = 4; });
  REQUIRE(quorum.size() == 1);
  CHECK_THAT(*quorum.begin(), Catch::StartsWith("parallel.min_replicas: "));
}
