// Weighted mixtures: each source's share of the stream matches its weight (exactly at each
// block's end, within 1% over 10,000 sequences through the data layer), a source's own
// sequences run without gaps, a one-source stream is the source itself, the stream is the
// same on every construction; and data.train's spellings parse as documented.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <map>
#include <numeric>

#include "common/errors.hpp"
#include "engine/data/data.hpp"
#include "engine/data/mixture.hpp"
#include "engine/spec/data_sources.hpp"

using namespace holmes::data;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> sources_of(const std::string& yaml, std::vector<holmes::spec::DataSourceSpec>* out) {
  const std::string err = holmes::spec::parse_data_sources(YAML::Load(yaml), out);
  std::vector<std::string> names;
  for (const auto& s : *out) names.push_back(s.name);
  if (!err.empty()) names = {"error: " + err};
  return names;
}

}  // namespace

TEST_CASE("a mixture gives every source its weight's share, exactly per block, without gaps") {
  const std::vector<double> weights = {0.6, 0.25, 0.1, 0.05};
  const Mixture m(weights);
  std::vector<int64_t> count(weights.size(), 0), next(weights.size(), 0);
  int64_t worst = 0;
  for (int64_t i = 0; i < 3 * Mixture::kBlock; ++i) {
    const Mixture::Pick p = m.pick(i);
    REQUIRE(p.index == next[static_cast<size_t>(p.source)]);  // 0, 1, 2, ... per source
    ++next[static_cast<size_t>(p.source)];
    ++count[static_cast<size_t>(p.source)];
    // Never more than one sequence away from the exact share at any prefix of a block.
    for (size_t s = 0; s < weights.size(); ++s)
      worst = std::max<int64_t>(worst, std::llabs(static_cast<int64_t>(std::llround(
                                                      static_cast<double>(i % Mixture::kBlock + 1) *
                                                      static_cast<double>(m.per_block(static_cast<int>(s))) /
                                                      Mixture::kBlock)) -
                                                  (count[s] - (i / Mixture::kBlock) * m.per_block(static_cast<int>(s)))));
    if ((i + 1) % Mixture::kBlock == 0)
      for (size_t s = 0; s < weights.size(); ++s)
        CHECK(count[s] == (i + 1) / Mixture::kBlock * m.per_block(static_cast<int>(s)));
  }
  CHECK(worst <= 1);
  for (size_t s = 0; s < weights.size(); ++s)
    CHECK(std::abs(static_cast<double>(m.per_block(static_cast<int>(s))) / Mixture::kBlock - weights[s]) <
          1.0 / Mixture::kBlock);
  // Any index maps alone (resumes, ranks): the same as walking there.
  const Mixture again(weights);
  for (int64_t i : {int64_t{0}, int64_t{12345}, Mixture::kBlock * 7 + 99, int64_t{1} << 40}) {
    CHECK(again.pick(i).source == m.pick(i).source);
    CHECK(again.pick(i).index == m.pick(i).index);
  }
  // One source: the stream is the source.
  const Mixture one({3.0});
  for (int64_t i : {int64_t{0}, int64_t{65535}, int64_t{65536}, int64_t{1} << 33}) {
    CHECK(one.pick(i).source == 0);
    CHECK(one.pick(i).index == i);
  }
  CHECK_THROWS_AS(Mixture({1.0, 0.0}), std::invalid_argument);
}

TEST_CASE("a two-source token mixture through the data layer: proportions within 1% over 10,000 sequences") {
  const fs::path d = fs::temp_directory_path() / fmt::format("holmes-mixture-test-{}", ::getpid());
  fs::remove_all(d);
  fs::create_directories(d);
  // Source a holds ids 0..99, source b ids 100..199: a sequence's ids say where it came from.
  auto write_source = [&](const std::string& name, uint16_t base, size_t n) {
    std::vector<uint16_t> ids(n);
    for (size_t i = 0; i < n; ++i) ids[i] = static_cast<uint16_t>(base + i % 97);
    write_llmc_tokens((d / name).string(), ids);
  };
  write_source("a.bin", 0, 50000);
  write_source("b.bin", 100, 7000);  // far smaller: it is read for many epochs
  holmes::spec::JobSpec spec;
  spec.data.source = holmes::spec::DataSource::kFiles;
  spec.model.vocab_size = 257;
  spec.train.seq_len = 16;
  std::vector<holmes::spec::DataSourceSpec> sources;
  sources_of(fmt::format("[{{path: {}, weight: 3}}, {{path: {}, weight: 1, name: small}}]", (d / "a.bin").string(),
                         (d / "b.bin").string()),
             &sources);
  spec.data.train = sources;
  const auto data = DataSet::open(spec);
  REQUIRE(data->train().source_count() == 2);
  CHECK(data->train().source(1).name == "small");
  REQUIRE(data->valid_sources().size() == 2);  // each source's held-out tail
  const int T = spec.train.seq_len;
  std::vector<int32_t> in(T), tg(T);
  int from_b = 0;
  const int n = 10000;
  for (int64_t i = 0; i < n; ++i) {
    data->train().fill_sequence(i, in.data(), tg.data());
    const bool b = in[0] >= 100;
    for (int t = 0; t < T; ++t) REQUIRE((in[t] >= 100) == b);  // one source per sequence
    from_b += b ? 1 : 0;
  }
  CHECK(std::abs(from_b / double(n) - 0.25) < 0.01);
  // Weights count tokens: every sequence holds T + 1, so the token share is the same.
  std::map<int, int> seen;
  for (int64_t i = 0; i < n; ++i) ++seen[data->train().pick(i).source];
  CHECK(seen[1] == from_b);
  fs::remove_all(d);
}

TEST_CASE("data.train spellings: one path, a path list, weighted mappings, Megatron's list") {
  std::vector<holmes::spec::DataSourceSpec> s;
  CHECK(sources_of("web.bin", &s) == std::vector<std::string>{"web"});
  CHECK(s[0].paths == std::vector<std::string>{"web.bin"});
  CHECK_FALSE(s[0].weighted);
  CHECK(sources_of("[a.bin, b.bin]", &s) == std::vector<std::string>{"a"});
  CHECK(s[0].paths.size() == 2);
  CHECK(holmes::spec::show_data_sources(s) == "[\"a.bin\", \"b.bin\"]");
  CHECK(sources_of("[0.7, data/web, 0.3, code.idx]", &s) == std::vector<std::string>{"web", "code"});
  CHECK(s[0].weight == 0.7);
  CHECK(s[1].paths == std::vector<std::string>{"code.idx"});
  CHECK(sources_of("[{path: [x/a.bin, b.bin], weight: 2, name: mix}, {path: x/a.bin, weight: 1}]", &s) ==
        std::vector<std::string>{"mix", "a"});
  // Printed and read back: the same sources.
  std::vector<holmes::spec::DataSourceSpec> back;
  sources_of(holmes::spec::show_data_sources(s), &back);
  REQUIRE(back.size() == 2);
  CHECK(back[0].paths == s[0].paths);
  CHECK(back[1].weight == 1);
  CHECK(back[1].name == "a");
  // Two sources named alike by their files: the second gets a suffix.
  CHECK(sources_of("[{path: d1/web.bin, weight: 1}, {path: d2/web.bin, weight: 1}]", &s) ==
        std::vector<std::string>{"web", "web-2"});
  // What is refused names what is wrong.
  CHECK_THAT(sources_of("[a.bin, {path: b.bin, weight: 1}]", &s)[0], Catch::Contains("mixing paths and"));
  CHECK_THAT(sources_of("[{path: a.bin, weight: 0}]", &s)[0], Catch::Contains("expected a number > 0"));
  CHECK_THAT(sources_of("[{path: a.bin, wieght: 1}]", &s)[0], Catch::Contains("the key 'wieght'"));
  CHECK_THAT(sources_of("[{weight: 1}]", &s)[0], Catch::Contains("has no 'path'"));
  CHECK_THAT(sources_of("[{path: a, name: x}, {path: b, name: x}]", &s)[0], Catch::Contains("given to two sources"));
  CHECK_THAT(sources_of("[{path: a, name: 'a b'}]", &s)[0], Catch::Contains("letters, digits"));
}
