// Writes what the PyTorch golden check (golden_check.py) compares against: a small GPT's
// initial weights and size table, a batch, the logits, loss and every gradient of the first
// step, and the losses of 10 AdamW steps with global-norm clipping.
// Usage: holmes-golden-dump OUT_DIR
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/parallel/adamw.hpp"
#include "backends/backends.hpp"
#include "model/gpt.hpp"
#include "model/gpt2/gpt2.hpp"

using namespace holmes;

namespace {

// Small, deliberately unaligned sizes: HS = 12, V = 101 padded to 128, T = 11.
constexpr int kLayers = 2, kHidden = 48, kHeads = 4, kVocab = 101, kMaxSeq = 16;
constexpr int kB = 3, kT = 11, kSteps = 10;
constexpr uint64_t kSeed = 1337;
constexpr float kLr = 1e-3f, kWeightDecay = 0.1f, kBeta1 = 0.9f, kBeta2 = 0.95f, kEps = 1e-8f;
constexpr double kClip = 1.0;

template <typename T>
void write_bin(const std::string& path, const T* data, size_t n) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(n * sizeof(T)));
  if (!f) throw std::runtime_error("cannot write " + path);
}

void write_layout(const std::string& path, const model::ParamLayout& layout) {
  std::ofstream f(path);
  for (const auto& t : layout.tensors()) {
    f << t.name << ' ' << t.offset << ' ' << t.numel << ' ' << (t.weight_decay ? 1 : 0);
    for (int64_t d : t.shape) f << ' ' << d;
    f << '\n';
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: holmes-golden-dump OUT_DIR\n");
    return 2;
  }
  const std::string out = argv[1];
  auto backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  model::Gpt gpt(model::gpt2::config(kLayers, kHidden, kHeads, kVocab, kMaxSeq), backend, kB, kT);
  gpt.init_weights(kSeed);
  const size_t P = gpt.num_params();
  const auto& cfg = gpt.config();
  {
    std::ofstream meta(out + "/meta.txt");
    meta << fmt::format("layers {}\nhidden {}\nheads {}\nvocab {}\npadded_vocab {}\nmax_seq_len {}\n",
                        kLayers, kHidden, kHeads, kVocab, cfg.padded_vocab, kMaxSeq)
         << fmt::format("B {}\nT {}\nsteps {}\nlr {}\nweight_decay {}\nbeta1 {}\nbeta2 {}\neps {}\nclip {}\n",
                        kB, kT, kSteps, kLr, kWeightDecay, kBeta1, kBeta2, kEps, kClip);
  }
  write_layout(out + "/layout.txt", gpt.layout());
  write_bin(out + "/params.bin", gpt.params(), P);

  // One batch per step; step 0's batch is also the one whose logits and gradients are dumped.
  std::mt19937 gen(7);
  std::vector<int> tokens(kSteps * kB * kT), targets(kSteps * kB * kT);
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<int>(gen() % kVocab);
    targets[i] = static_cast<int>(gen() % kVocab);
  }
  write_bin(out + "/tokens.bin", tokens.data(), tokens.size());
  write_bin(out + "/targets.bin", targets.data(), targets.size());

  std::vector<parallel::DecayRange> ranges;
  for (const auto& t : gpt.layout().tensors()) ranges.push_back({t.offset, t.offset + t.numel, t.weight_decay});
  std::vector<float> m(P, 0.0f), v(P, 0.0f), losses;
  const parallel::AdamWHyper hyper{kLr, kBeta1, kBeta2, kEps, kWeightDecay};
  for (int step = 0; step < kSteps; ++step) {
    const size_t at = static_cast<size_t>(step) * kB * kT;
    gpt.zero_grad();
    losses.push_back(gpt.forward(tokens.data() + at, targets.data() + at, kB, kT));
    if (step == 0) {
      std::vector<float> logits(static_cast<size_t>(kB) * kT * cfg.padded_vocab);
      for (size_t row = 0; row < static_cast<size_t>(kB) * kT; ++row)
        gpt.read_logits(row, std::span<float>(logits).subspan(row * cfg.padded_vocab, cfg.padded_vocab));
      write_bin(out + "/logits.bin", logits.data(), logits.size());
    }
    gpt.backward();
    if (step == 0) write_bin(out + "/grads.bin", gpt.grads(), P);
    double sq = 0;
    backend.kernels->sum_squares_forward(&sq, gpt.grads(), P);
    const double norm = std::sqrt(sq);
    const float scale = parallel::clip_scale(norm, kClip);
    std::printf("step %d loss %.6f grad_norm %.4f clip_scale %.4f\n", step + 1, losses.back(), norm, scale);
    parallel::adamw_update(*backend.kernels, gpt.params(), gpt.grads(), m.data(), v.data(), 0, P, ranges, hyper, step + 1, scale);
  }
  std::ofstream lf(out + "/losses.txt");
  for (float l : losses) lf << fmt::format("{:.9g}\n", l);
  std::printf("holmes-golden-dump: %zu params, losses %.6f -> %.6f, wrote %s\n", P, losses.front(),
              losses.back(), out.c_str());
  return 0;
}
