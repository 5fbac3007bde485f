// Where documents start, as the loader sees them: positions restart at each document (from
// the document token of an llm.c file, from a Megatron index's boundaries, also in the
// held-out tail that starts mid-file), targets that start a document become -1 with
// data.mask_document_start and are not counted; and the loader's position: a step's sequences
// follow from where the stream stood at the run's origin.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <algorithm>
#include <numeric>
#include <random>

#include "common/errors.hpp"
#include "engine/data/data.hpp"
#include "engine/data/indexed_dataset.hpp"

using namespace holmes::data;
namespace fs = std::filesystem;

namespace {

fs::path temp_dir(const std::string& name) {
  auto d = fs::temp_directory_path() / fmt::format("holmes-document-test-{}-{}", ::getpid(), name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// Documents of random lengths 1..40: their tokens (ids 1..200, no document token) and starts.
struct Docs {
  std::vector<std::vector<uint32_t>> docs;
  std::vector<uint32_t> flat;
  std::vector<bool> starts;  // per token of flat
};

Docs make_docs(int n, uint32_t seed, int doc_token) {
  std::mt19937 rng(seed);
  Docs d;
  for (int k = 0; k < n; ++k) {
    std::vector<uint32_t> doc;
    if (doc_token >= 0) doc.push_back(static_cast<uint32_t>(doc_token));
    const int len = 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < len; ++i) doc.push_back(1 + rng() % 200);
    for (size_t i = 0; i < doc.size(); ++i) d.starts.push_back(i == 0);
    d.flat.insert(d.flat.end(), doc.begin(), doc.end());
    d.docs.push_back(doc);
  }
  return d;
}

// The positions and masked targets a sequence at `offset` of `d` must get, by brute force.
void expect_sequence(const Docs& d, int64_t offset, int T, const int32_t* positions, const int32_t* targets) {
  int begin = 0;
  for (int t = 0; t < T; ++t) {
    if (t > 0 && d.starts[static_cast<size_t>(offset + t)]) begin = t;
    REQUIRE(positions[t] == t - begin);
    const bool next_starts = d.starts[static_cast<size_t>(offset + t + 1)];
    REQUIRE(targets[t] == (next_starts ? -1 : static_cast<int32_t>(d.flat[static_cast<size_t>(offset + t + 1)])));
  }
}

}  // namespace

TEST_CASE("positions restart at each document token of an llm.c file, starts' targets masked") {
  const Docs d = make_docs(400, 1, 256);
  std::vector<uint16_t> ids(d.flat.begin(), d.flat.end());
  const int T = 32;
  BatchSampler s({TokenSpan(ids)}, T, 9, /*shuffle=*/true, {DocumentStarts{nullptr, 0, 256}},
                 SequenceOptions{true, true});
  std::vector<int32_t> in(T), tg(T), pos(T);
  for (int64_t i = 0; i < 3 * s.chunk_count(); ++i) {  // three epochs: shuffled chunks, shifted grids
    s.fill_sequence(i, in.data(), tg.data(), pos.data());
    const auto at = s.place(i);
    expect_sequence(d, at.offset, T, pos.data(), tg.data());
    int masked = 0;
    for (int t = 0; t < T; ++t) masked += tg[t] < 0;
    REQUIRE(s.counted_targets(i) == T - masked);
  }
}

TEST_CASE("positions restart at a Megatron index's boundaries, in the held-out tail too") {
  const fs::path dir = temp_dir("idx");
  const Docs d = make_docs(300, 2, -1);  // no document token: the index alone knows
  {
    IndexedWriter w((dir / "m").string(), 257);
    for (const auto& doc : d.docs) {
      w.begin_document();
      w.append(doc);
    }
    w.commit();
  }
  holmes::spec::JobSpec spec;
  spec.data.source = holmes::spec::DataSource::kFiles;
  spec.data.train = {{"m", {(dir / "m").string()}, 1, false}};
  spec.data.document_mask = true;
  spec.data.mask_document_start = true;
  spec.train.seq_len = 16;
  const auto data = DataSet::open(spec);
  const int T = 16;
  std::vector<int32_t> in(T), tg(T), pos(T);
  const BatchSampler& train = data->train().source(0).sampler;
  for (int64_t i = 0; i < train.chunk_count(); ++i) {
    data->train().fill_sequence(i, in.data(), tg.data(), pos.data());
    expect_sequence(d, train.place(i).offset, T, pos.data(), tg.data());
  }
  // The tail starts mid-file: its offsets are the tail's, its boundaries the file's.
  REQUIRE(data->valid_sources().size() == 1);
  const BatchSampler& tail = data->valid_sources()[0].sampler;
  const int64_t base = static_cast<int64_t>(d.flat.size()) - data->valid_tokens();
  REQUIRE(tail.chunk_count() > 0);
  for (int64_t i = 0; i < tail.chunk_count(); ++i) {
    tail.fill_sequence(i, in.data(), tg.data(), pos.data());
    expect_sequence(d, base + tail.place(i).offset, T, pos.data(), tg.data());
  }
}

TEST_CASE("document masking on a file that names no document token is refused naming the key") {
  const fs::path dir = temp_dir("none");
  write_llmc_tokens((dir / "a.bin").string(), std::vector<uint16_t>(200, 3));
  holmes::spec::JobSpec spec;
  spec.data.source = holmes::spec::DataSource::kFiles;
  spec.data.train = {{"a", {(dir / "a.bin").string()}, 1, false}};
  spec.data.document_mask = true;
  spec.train.seq_len = 8;
  CHECK_THROWS_WITH(DataSet::open(spec), Catch::Contains("a.bin") && Catch::Contains("data.document_token"));
  spec.data.document_token = 3;  // given: every token starts a document
  const auto data = DataSet::open(spec);
  std::vector<int32_t> in(8), tg(8), pos(8);
  data->train().fill_sequence(0, in.data(), tg.data(), pos.data());
  CHECK(pos == std::vector<int32_t>(8, 0));
}

TEST_CASE("a step's sequences follow the stream from the run's origin, whatever the split") {
  // Step 7 of a run resumed at step 5 from sequence 40, global batch 16: sequences 72..87,
  // however the data-parallel ranks and micro-batches split them.
  std::vector<int64_t> seen;
  for (int dp : {1, 2, 4})
    for (int B : {1, 2, 4}) {
      if (16 % (dp * B) != 0) continue;
      seen.clear();
      for (int micro = 0; micro < 16 / (dp * B); ++micro)
        for (int r = 0; r < dp; ++r)
          for (int b = 0; b < B; ++b)
            seen.push_back(sample_index({.step = 7, .micro = micro, .dp_rank = r, .dp_size = dp, .micro_batch = B,
                                         .global_batch = 16, .origin = {5, 40}},
                                        b));
      std::sort(seen.begin(), seen.end());
      std::vector<int64_t> want(16);
      std::iota(want.begin(), want.end(), 72);
      CHECK(seen == want);
    }
}
