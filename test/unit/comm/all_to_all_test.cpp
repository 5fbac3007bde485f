// all_to_all and all_to_all_v (comm/process_group.hpp) on Gloo over loopback and in-process,
// against the blocks computed here: every member's input is distinct per element, so a block
// that lands in the wrong place, from the wrong member or with the wrong length shows.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "comm/errors.hpp"
#include "test/support/harness.hpp"

using namespace holmes::comm;
using namespace holmes::comm::test;

namespace {

// Element i of member r's input: exact in float (and, below 256, in bf16).
float value(int r, size_t i) { return static_cast<float>(1000 * (r + 1) + static_cast<int>(i)); }

// Elements member r sends member q in the variable-size test: 0 to 4, zeros included.
size_t count(int r, int q) { return static_cast<size_t>((r * 3 + q * 5 + 1) % 5); }

}  // namespace

TEST_CASE("all_to_all: block q of each member lands in block r of member q", "[comm]") {
  for (Impl impl : {Impl::kInProcess, Impl::kGloo}) {
    for (int world : {1, 2, 3, 4}) {
      DYNAMIC_SECTION(impl_name(impl) << " with " << world << " ranks") {
        Job job(impl, world);
        const size_t n = 5;  // elements per block
        std::vector<std::vector<float>> out(world);
        run_ranks(world, [&](int r) {
          auto store = job.store_for(r);
          auto pg = job.group(store, "world", job.all_ranks(), r);
          std::vector<float> in(n * world);
          for (size_t i = 0; i < in.size(); ++i) in[i] = value(r, i);
          out[r].assign(n * world, -1.f);
          pg->all_to_all(out[r], in);
          pg->all_to_all(out[r], in);  // twice: the second must match its own blocks, not the first's
        });
        for (int r = 0; r < world; ++r)
          for (int q = 0; q < world; ++q)
            for (size_t i = 0; i < n; ++i) CHECK(out[r][q * n + i] == value(q, r * n + i));
      }
    }
  }
}

TEST_CASE("all_to_all_v: blocks of every size, zero included, go where the counts say", "[comm]") {
  for (Impl impl : {Impl::kInProcess, Impl::kGloo}) {
    for (int world : {1, 2, 3, 4}) {
      DYNAMIC_SECTION(impl_name(impl) << " with " << world << " ranks") {
        Job job(impl, world);
        std::vector<std::vector<float>> out(world);
        std::vector<std::vector<size_t>> sent_at(world);  // member r's block q starts at sent_at[r][q]
        for (int r = 0; r < world; ++r) {
          size_t at = 0;
          for (int q = 0; q < world; ++q) sent_at[r].push_back(at), at += count(r, q);
        }
        run_ranks(world, [&](int r) {
          auto store = job.store_for(r);
          auto pg = job.group(store, "world", job.all_ranks(), r);
          std::vector<size_t> in_counts, out_counts;
          for (int q = 0; q < world; ++q) in_counts.push_back(count(r, q)), out_counts.push_back(count(q, r));
          size_t in_total = 0, out_total = 0;
          for (int q = 0; q < world; ++q) in_total += in_counts[q], out_total += out_counts[q];
          std::vector<float> in(in_total);
          for (size_t i = 0; i < in.size(); ++i) in[i] = value(r, i);
          out[r].assign(out_total, -1.f);
          pg->all_to_all_v(out[r], out_counts, in, in_counts);
        });
        for (int r = 0; r < world; ++r) {
          std::vector<float> want;
          for (int q = 0; q < world; ++q)
            for (size_t i = 0; i < count(q, r); ++i) want.push_back(value(q, sent_at[q][r] + i));
          CHECK(out[r] == want);
        }
      }
    }
  }
}

TEST_CASE("all_to_all_v moves 2-byte elements (bf16) by their bytes, odd counts too", "[comm]") {
  for (Impl impl : {Impl::kInProcess, Impl::kGloo}) {
    DYNAMIC_SECTION(impl_name(impl)) {
      const int world = 3;
      Job job(impl, world);
      std::vector<std::vector<uint16_t>> out(world);
      run_ranks(world, [&](int r) {
        auto store = job.store_for(r);
        auto pg = job.group(store, "bf16", job.all_ranks(), r);
        // Member r sends q + 1 elements to member q, each 0x100 (r + 1) + q.
        std::vector<size_t> in_counts, out_counts;
        std::vector<uint16_t> in;
        for (int q = 0; q < world; ++q) {
          in_counts.push_back(q + 1);
          out_counts.push_back(r + 1);
          for (int i = 0; i <= q; ++i) in.push_back(static_cast<uint16_t>(0x100 * (r + 1) + q));
        }
        out[r].assign(world * (r + 1), 0);
        pg->all_to_all_v(out[r].data(), out_counts, in.data(), in_counts, DType::kBf16);
      });
      for (int r = 0; r < world; ++r) {
        std::vector<uint16_t> want;
        for (int q = 0; q < world; ++q)
          for (int i = 0; i <= r; ++i) want.push_back(static_cast<uint16_t>(0x100 * (q + 1) + r));
        CHECK(out[r] == want);
      }
    }
  }
}

TEST_CASE("all_to_all_v: wrong sizes are programming errors, mismatched counts a CommError naming the member",
          "[comm]") {
  Job job(Impl::kInProcess, 2);
  std::vector<std::string> errors(2);
  run_ranks(2, [&](int r) {
    auto pg = job.group(nullptr, "counts", job.all_ranks(), r, std::chrono::seconds(5));
    std::vector<float> in(4, 1.f), out(4);
    const std::vector<size_t> two = {2, 2}, three = {1, 1, 2};
    CHECK_THROWS_AS(pg->all_to_all(std::span<float>(out.data(), 3), in), std::invalid_argument);
    CHECK_THROWS_AS(pg->all_to_all_v(out, two, in, three), std::invalid_argument);
    CHECK_THROWS_AS(pg->all_to_all_v(std::span<float>(out.data(), 3), two, in, two), std::invalid_argument);
    // Member 1 expects 3 elements from member 0, which sends 2.
    const std::vector<size_t> expect = r == 1 ? std::vector<size_t>{3, 2} : two;
    std::vector<float> wide(5);
    try {
      pg->all_to_all_v(r == 1 ? std::span<float>(wide) : std::span<float>(out), expect, in, two);
    } catch (const CommError& e) {
      errors[r] = e.what();
    }
  });
  for (int r = 0; r < 2; ++r) {
    INFO(errors[r]);
    CHECK_THAT(errors[r], Catch::Matchers::Contains("member 0 sends 2 elements to member 1, which expects 3"));
  }
}
