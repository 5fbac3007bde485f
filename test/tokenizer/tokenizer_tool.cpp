// holmes-tokenizer-tool: the tokenizer library from the shell, for the exactness test
// (test/integration/tokenizer_exact.sh) and the speed benchmark (scripts/bench_tokenizer.sh).
//   encode SPEC IN OUT [--threads N] [--window BYTES] [--allow-special]
//       IN (one document) -> OUT, little-endian uint32 ids
//   decode SPEC IN OUT       uint32 ids -> bytes
//   bench SPEC FILE THREADS [SECONDS]
//       MB/s of encoding FILE (held in memory) on 1 thread and on THREADS threads
//   info SPEC                one line: name, ids, document token, hash
//   specials SPEC            "ID TEXT" per special token, by id
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "engine/tokenizer/load.hpp"
#include "engine/tokenizer/parallel.hpp"

using namespace holmes::tokenizer;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot read");
  std::ostringstream s;
  s << in.rdbuf();
  return std::move(s).str();
}

void write_all(const std::string& path, const void* data, size_t bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  if (!out) throw std::runtime_error(path + ": cannot write");
}

int encode(const std::vector<std::string>& a) {
  int threads = 1;
  size_t window = 64 << 20;
  bool allow_special = false;
  for (size_t i = 3; i < a.size(); ++i) {
    if (a[i] == "--threads" && i + 1 < a.size()) threads = std::stoi(a[++i]);
    else if (a[i] == "--window" && i + 1 < a.size()) window = std::stoull(a[++i]);
    else if (a[i] == "--allow-special") allow_special = true;
    else throw std::runtime_error("encode: unknown option " + a[i]);
  }
  const auto tok = load_tokenizer(a[0]);
  ParallelEncoder enc(*tok, allow_special, threads, std::min<size_t>(window / 4 + 1, 256 * 1024));
  std::FILE* in = std::fopen(a[1].c_str(), "rb");
  if (!in) throw std::runtime_error(a[1] + ": cannot read");
  std::vector<uint32_t> all;
  encode_document(enc, [&](char* p, size_t n) { return std::fread(p, 1, n, in); }, window,
                  [&](std::span<const uint32_t> t, size_t) { all.insert(all.end(), t.begin(), t.end()); });
  std::fclose(in);
  write_all(a[2], all.data(), all.size() * 4);
  return 0;
}

int decode(const std::vector<std::string>& a) {
  const auto tok = load_tokenizer(a[0]);
  const std::string raw = slurp(a[1]);
  std::vector<uint32_t> ids(raw.size() / 4);
  std::memcpy(ids.data(), raw.data(), ids.size() * 4);
  const std::string text = tok->decode(ids);
  write_all(a[2], text.data(), text.size());
  return 0;
}

// Best of several runs of at least `seconds` in total, so a loaded machine's noise shows less.
double mb_per_s(const Tokenizer& tok, const std::string& text, int threads, double seconds) {
  ParallelEncoder enc(tok, false, threads);
  std::vector<uint32_t> out;
  out.reserve(text.size() / 2);
  double best = 0, spent = 0;
  for (int run = 0; run < 2 || spent < seconds; ++run) {
    out.clear();
    const auto t0 = std::chrono::steady_clock::now();
    enc.encode(text, false, &out);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    spent += s;
    best = std::max(best, static_cast<double>(text.size()) / 1e6 / s);
  }
  return best;
}

int bench(const std::vector<std::string>& a) {
  const auto tok = load_tokenizer(a[0]);
  const std::string text = slurp(a[1]);
  const int threads = std::stoi(a[2]);
  const double seconds = a.size() > 3 ? std::stod(a[3]) : 5.0;
  const double one = mb_per_s(*tok, text, 1, seconds);
  const double many = mb_per_s(*tok, text, threads, seconds);
  fmt::print("bytes {} threads {} mb_per_s_1 {:.2f} mb_per_s_n {:.2f}\n", text.size(), threads, one, many);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> a(argv + 1, argv + argc);
  try {
    if (a.size() >= 4 && a[0] == "encode") return encode({a.begin() + 1, a.end()});
    if (a.size() == 4 && a[0] == "decode") return decode({a.begin() + 1, a.end()});
    if (a.size() >= 4 && a[0] == "bench") return bench({a.begin() + 1, a.end()});
    if (a.size() == 2 && a[0] == "specials") {
      auto specials = load_tokenizer(a[1])->specials();
      std::sort(specials.begin(), specials.end(), [](const auto& x, const auto& y) { return x.id < y.id; });
      for (const auto& sp : specials) fmt::print("{} {}\n", sp.id, sp.text);
      return 0;
    }
    if (a.size() == 2 && a[0] == "info") {
      fmt::print("{}\n", load_tokenizer(a[1])->describe());
      return 0;
    }
    fmt::print(stderr, "usage: holmes-tokenizer-tool encode|decode|bench|info|specials ... (see the source's header)\n");
    return 2;
  } catch (const holmes::UserError& e) {
    fmt::print(stderr, "holmes-tokenizer-tool: error: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "holmes-tokenizer-tool: failed: {}\n", e.what());
    return 1;
  }
}
