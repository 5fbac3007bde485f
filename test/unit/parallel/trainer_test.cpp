// The single-process Trainer, the final weights file and generation: properties a user
// relies on (accumulation does not change the maths, training learns, weights reload
// exactly, sampling is reproducible).
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "common/errors.hpp"
#include "engine/spec/validate.hpp"
#include "engine/data/data.hpp"
#include "engine/tools/generate.hpp"
#include "engine/checkpoint/model_file.hpp"
#include "engine/parallel/trainer.hpp"
#include "backends/backends.hpp"

namespace fs = std::filesystem;
using namespace holmes;
using namespace holmes::checkpoint;
using namespace holmes::data;
using namespace holmes::parallel;
using namespace holmes::tools;

namespace {

spec::JobSpec small_job() {
  spec::JobSpec s;
  s.job.seed = 99;
  s.model.layers = 2;
  s.model.hidden = 32;
  s.model.heads = 2;
  s.model.vocab_size = 257;
  s.model.max_seq_len = 32;
  s.data.source = holmes::spec::DataSource::kSynthetic;
  s.data.synthetic.tokens = 60'000;
  s.train.steps = 40;
  s.train.micro_batch = 8;
  s.train.global_batch = 8;
  s.train.seq_len = 32;
  s.train.lr = 3e-3;
  s.train.min_lr = 3e-4;
  s.train.warmup_steps = 2;
  s.train.grad_clip = 1.0;
  s.train.eval_steps = 2;
  return s;
}

fs::path temp_dir(const std::string& name) {
  auto dir = fs::temp_directory_path() / fmt::format("holmes-trainer-{}-{}", name, ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

}  // namespace

TEST_CASE("gradient accumulation over micro-batches gives the same steps as one big batch", "[trainer]") {
  auto backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  spec::JobSpec one = small_job();  // one micro-batch of 8
  spec::JobSpec four = one;
  four.train.micro_batch = 2;       // four micro-batches of 2
  auto data = DataSet::open(one);
  Trainer a(one, backend, *data), b(four, backend, *data);
  REQUIRE(a.micro_batches() == 1);
  REQUIRE(b.micro_batches() == 4);
  for (int64_t step = 0; step < 4; ++step) {
    StepStats sa = a.train_step(step), sb = b.train_step(step);
    CHECK(sb.loss == Approx(sa.loss).epsilon(1e-5));
    CHECK(sb.grad_norm == Approx(sa.grad_norm).epsilon(1e-4));
    CHECK(sb.lr == sa.lr);
  }
  double worst = 0;
  const float* pa = a.model().params();
  const float* pb = b.model().params();
  for (size_t i = 0; i < a.model().num_params(); ++i)
    worst = std::max(worst, static_cast<double>(std::fabs(pa[i] - pb[i])));
  CHECK(worst < 1e-4);
}

TEST_CASE("training on the synthetic corpus lowers the training and validation loss", "[trainer]") {
  auto backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  spec::JobSpec spec = small_job();
  auto data = DataSet::open(spec);
  Trainer t(spec, backend, *data);
  const double val_before = t.evaluate();
  double first = 0, last = 0;
  for (int64_t step = 0; step < spec.train.steps; ++step) {
    StepStats s = t.train_step(step);
    if (step == 0) first = s.loss;
    last = s.loss;
    REQUIRE(std::isfinite(s.loss));
  }
  const double val_after = t.evaluate();
  // Untrained: about ln(257) = 5.55 nats; the grammar is learnable well below that.
  CHECK(first > 5.0);
  CHECK(last < first - 1.0);
  CHECK(val_after < val_before - 1.0);
  // Evaluation is deterministic (same batches every time) and does not change the model.
  CHECK(t.evaluate() == val_after);
}

namespace {

// Making a Trainer for `spec` throws a UserError whose message holds every needle.
void refused(const spec::JobSpec& spec, holmes::model::Backend& backend, const DataSet& data,
             std::initializer_list<const char*> needles) {
  try {
    Trainer t(spec, backend, data);
    FAIL("expected a UserError");
  } catch (const UserError& e) {
    const std::string what = e.what();
    for (const char* n : needles) CHECK(what.find(n) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("a batch that does not divide is the spec's rule, the trainer only asserts it", "[trainer]") {
  auto backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  spec::JobSpec spec = small_job();
  spec.train.micro_batch = 3;  // 8 is not a multiple of 3
  const auto problems = spec::cross_field_problems(spec);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].key == "train.global_batch");
  CHECK_THAT(problems[0].message, Catch::Contains("train.micro_batch"));
  auto data = DataSet::open(small_job());
  CHECK_THROWS_AS(Trainer(spec, backend, *data), std::invalid_argument);
}

TEST_CASE("train.precision: auto and fp32 train in fp32 on the CPU, bf16 is refused naming the key", "[trainer]") {
  auto backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  spec::JobSpec spec = small_job();
  for (const auto p : {holmes::spec::Precision::kAuto, holmes::spec::Precision::kFp32}) {
    spec.train.precision = p;
    CHECK(precision_of(spec, backend) == holmes::DType::kF32);
  }
  spec.train.precision = holmes::spec::Precision::kBf16;
  auto data = DataSet::open(small_job());
  refused(spec, backend, *data, {"train.precision: 'bf16'", "accepted here: auto, fp32"});
}

TEST_CASE("shard_state of the single-process trainer owns the whole buffer", "[trainer]") {
  auto backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  spec::JobSpec spec = small_job();
  auto data = DataSet::open(spec);
  Trainer t(spec, backend, *data);
  ShardState st = t.shard_state();
  REQUIRE(st.layout != nullptr);
  CHECK(st.layout->size() == t.model().num_params());
  REQUIRE(st.owned.size() == 1);
  CHECK(st.owned[0].first == 0);
  CHECK(st.owned[0].second == t.model().num_params());
  CHECK(st.owned_size() == t.model().num_params());
  CHECK(st.params == t.model().params());
}

TEST_CASE("final weights reload bit for bit, a damaged file is refused naming it", "[trainer]") {
  auto backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  spec::JobSpec spec = small_job();
  auto data = DataSet::open(spec);
  Trainer t(spec, backend, *data);
  t.train_step(0);
  const fs::path dir = temp_dir("weights");
  const std::string path = (dir / "model.bin").string();
  save_model_weights(path, t.model());
  ModelWeights w = load_model_weights(path);
  CHECK(w.config.layers == spec.model.layers);
  CHECK(w.config.hidden == spec.model.hidden);
  CHECK(w.config.vocab == spec.model.vocab_size);
  REQUIRE(w.params.size() == t.model().num_params());
  CHECK(std::equal(w.params.begin(), w.params.end(), t.model().params()));

  fs::resize_file(path, fs::file_size(path) / 2);
  try {
    load_model_weights(path);
    FAIL("expected a UserError");
  } catch (const UserError& e) {
    CHECK(std::string(e.what()).find(path) != std::string::npos);
  }
  CHECK_THROWS_AS(load_model_weights((dir / "absent.bin").string()), UserError);
  fs::remove_all(dir);
}

TEST_CASE("pick_token: greedy and top-1 take the arg-max, sampling follows the draw", "[generate]") {
  const std::vector<float> logits = {0.1f, 2.0f, -1.0f, 1.5f};
  SampleOptions greedy;
  greedy.temperature = 0;
  CHECK(pick_token(logits.data(), 4, greedy, 0.99) == 1);
  SampleOptions top1;
  top1.top_k = 1;
  CHECK(pick_token(logits.data(), 4, top1, 0.0) == 1);
  CHECK(pick_token(logits.data(), 4, top1, 0.999) == 1);
  SampleOptions top2;
  top2.top_k = 2;
  top2.temperature = 1.0f;
  // Only tokens 1 and 3 may come out; a draw near 0 picks the likelier one, near 1 the other.
  CHECK(pick_token(logits.data(), 4, top2, 0.0) == 1);
  CHECK(pick_token(logits.data(), 4, top2, 0.999) == 3);
}

TEST_CASE("generation is reproducible for a seed and stays in the vocabulary", "[generate]") {
  auto backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  spec::JobSpec spec = small_job();
  spec.model.max_seq_len = 8;
  spec.train.seq_len = 8;
  model::Gpt gpt(gpt_config_of(spec), backend, 1, spec.model.max_seq_len);
  gpt.init_weights(7);
  SampleOptions o;
  o.max_new_tokens = 12;  // longer than max_seq_len: the window slides
  o.seed = 5;
  const std::vector<int> prompt = {72, 101, 108};
  auto a = generate(gpt, prompt, o);
  auto b = generate(gpt, prompt, o);
  CHECK(a == b);
  CHECK(a.size() == 12);
  for (int tok : a) CHECK((tok >= 0 && tok < spec.model.vocab_size));
  o.seed = 6;
  CHECK(generate(gpt, prompt, o) != a);
  auto stopped = generate(gpt, prompt, SampleOptions{o.max_new_tokens, o.temperature, o.top_k, 5, a[3]});
  CHECK(stopped.size() <= 4);
  CHECK(stopped.back() == a[3]);
}

TEST_CASE("document-start targets left out: the step's loss is the mean over the targets that count", "[trainer]") {
  // Documents of 3-20 tokens, each starting with 256 (data.document_token): a masked step's
  // loss is the plain model's per-target losses summed over the counted targets, over their
  // number, whatever the micro-batch split; the masked targets are exactly those before a 256.
  auto backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  const fs::path dir = temp_dir("docs");
  std::vector<uint16_t> ids;
  for (uint32_t x = 7; ids.size() < 20000;) {
    ids.push_back(256);
    x = x * 1103515245u + 12345u;
    for (uint32_t k = 0, n = 2 + (x >> 16) % 18; k < n; ++k) ids.push_back(static_cast<uint16_t>((x >> (k % 8)) % 250));
  }
  write_llmc_tokens((dir / "docs.bin").string(), ids);
  spec::JobSpec masked = small_job();
  masked.data.source = spec::DataSource::kFiles;
  masked.data.train = {{"docs", {(dir / "docs.bin").string()}, 1, false}};
  masked.data.document_token = 256;
  masked.data.mask_document_start = true;
  masked.data.document_mask = true;
  masked.train.micro_batch = 2;  // four micro-batches
  auto data = DataSet::open(masked);
  Trainer trainer(masked, backend, *data);
  const int B = 8, T = masked.train.seq_len;
  // The same 8 sequences through a plain model with the trainer's initial weights.
  std::vector<int32_t> in(B * T), tg(B * T), pos(B * T);
  data->train().fill_batch({.step = 0, .micro = 0, .dp_rank = 0, .dp_size = 1, .micro_batch = B, .global_batch = B,
                            .origin = {}},
                           in.data(), tg.data(), pos.data());
  model::ActivationPolicy policy;
  policy.document_mask = true;
  model::Gpt ref(gpt_config_of(masked), backend, B, T, nullptr, 1, DType::kF32, policy);
  ref.load_params(trainer.model().read_params());
  std::vector<int32_t> plain = tg;
  int counted = 0, boundaries = 0;
  for (int i = 0; i < B * T; ++i) {
    if (tg[i] < 0) plain[i] = 256, ++boundaries;  // the masked target is the next document's start
    counted += tg[i] >= 0;
  }
  REQUIRE(boundaries > 0);
  ref.forward(in.data(), plain.data(), B, T, pos.data());
  double sum = 0;
  for (int i = 0; i < B * T; ++i)
    if (tg[i] >= 0) sum += ref.losses()[i];
  const StepStats s = trainer.train_step(0);
  CHECK(s.loss == Approx(sum / counted).epsilon(1e-5));
}
