// The parity table for Llama's ops (rmsnorm, rope, swiglu; grouped-query attention has its
// rows in attention_parity_test.cpp): every op x {fp32, bf16} x {aligned, odd, ragged} shapes
// against the CPU twin (the registry's "cpu" kernels, fp32 on the bf16-rounded inputs), through
// the harness of parity.hpp: outputs poisoned with NaN (accumulating outputs and rope's
// untouched channels start as random values), guard bytes around every buffer, one markdown
// row per output. Tolerances as parity_table_test.cpp (normalized error): fp32 outputs 1e-5,
// bf16 outputs 1e-2, fp32 outputs of a bf16 op (rstd, dweight) 1e-5. A second case runs each
// op twice at Llama 1B sizes and requires bit-identical results. Skips without a GPU.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "cuda/rmsnorm.hpp"
#include "cuda/rope.hpp"
#include "cuda/swiglu.hpp"
#include "cuda_test_util.hpp"
#include "backends/backends.hpp"
#include "parity.hpp"

using namespace holmes;
using namespace holmes::cuda::parity;
using holmes::cuda::test::gpu_or_skip;
using holmes::cuda::test::random_floats;

namespace {

constexpr double kFp32 = 1e-5, kBf16 = 1e-2;

template <class E>
double tol_of() {
  return std::is_same_v<E, model::bf16> ? kBf16 : kFp32;
}

// N = B*T rows of C channels; rope on NH + KVH heads of HS inside rows of (NH + 2 KVH) HS;
// SwiGLU of width F. aligned: every 16-byte path; odd: T = 37, F = 101 (rows start at every
// offset); ragged: C = 77 (no packs at all), HS = 6.
struct Shape {
  const char* name;
  int B, T, C, NH, KVH, HS, F;
  int N() const { return B * T; }
  int W() const { return (NH + 2 * KVH) * HS; }
};

const std::vector<Shape>& shapes() {
  static const std::vector<Shape> s = {
      {"aligned", 2, 64, 256, 8, 2, 32, 512},
      {"odd", 3, 37, 80, 5, 1, 16, 101},
      {"ragged", 2, 5, 77, 3, 3, 6, 13},
  };
  return s;
}

std::string label(const Shape& s) {
  return std::string(s.name) + " B" + std::to_string(s.B) + " T" + std::to_string(s.T) + " C" +
         std::to_string(s.C) + " NH" + std::to_string(s.NH) + " KVH" + std::to_string(s.KVH) + " HS" +
         std::to_string(s.HS) + " F" + std::to_string(s.F);
}

template <class F>
void run_case(Table& t, const char* op, const char* precision, const std::string& shape, F f) {
  try {
    f();
  } catch (const std::exception& e) {
    t.fail(op, precision, shape, e.what());
  }
}

std::vector<float> rope_table(int T, int HS, double theta) {
  std::vector<float> cs(std::size_t(T) * HS);
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < HS / 2; ++i) {
      const double a = t * std::pow(theta, -2.0 * i / HS);
      cs[t * HS + i] = float(std::cos(a));
      cs[t * HS + HS / 2 + i] = float(std::sin(a));
    }
  return cs;
}

template <class E>
void rmsnorm_rows(Table& t, model::Kernels& cpu, const Shape& s) {
  const char* p = precision_of<E>();
  const int N = s.N(), C = s.C;
  const std::string shape = label(s);
  const float eps = 1e-5f;
  auto inp = random_floats(std::size_t(N) * C, 71, -3.f, 3.f), w = random_floats(C, 72);
  round_as<E>(inp);
  round_as<E>(w);
  std::vector<float> out(std::size_t(N) * C), rstd(N);
  cpu.rmsnorm_forward(out.data(), rstd.data(), inp.data(), w.data(), N, C, eps);
  run_case(t, "rmsnorm_forward", p, shape, [&] {
    Guarded<E> g_inp(store_as<E>(inp)), g_w(store_as<E>(w));
    auto g_out = Guarded<E>::poisoned(out.size());
    auto g_rstd = Guarded<float>::poisoned(N);
    cuda::rmsnorm_forward(g_out.dev(), g_rstd.dev(), g_inp.dev(), g_w.dev(), N, C, eps);
    t.compare("rmsnorm_forward", p, shape, "out", g_out.values(), widened(out), tol_of<E>(), g_out.guards());
    t.compare("rmsnorm_forward", p, shape, "rstd", g_rstd.values(), widened(rstd), kFp32, g_rstd.guards());
  });
  run_case(t, "rmsnorm_backward", p, shape, [&] {
    auto dout = random_floats(std::size_t(N) * C, 73), dinp = random_floats(std::size_t(N) * C, 74);
    round_as<E>(dout);
    round_as<E>(dinp);  // dinp accumulates in E
    auto dw = random_floats(C, 75);
    Guarded<E> g_dout(store_as<E>(dout)), g_inp(store_as<E>(inp)), g_w(store_as<E>(w)), g_dinp(store_as<E>(dinp));
    Guarded<float> g_dw(dw), g_rstd(rstd);
    cpu.rmsnorm_backward(dinp.data(), dw.data(), dout.data(), inp.data(), w.data(), rstd.data(), N, C);
    cuda::rmsnorm_backward(g_dinp.dev(), g_dw.dev(), g_dout.dev(), g_inp.dev(), g_w.dev(), g_rstd.dev(), N, C);
    t.compare("rmsnorm_backward", p, shape, "dinp", g_dinp.values(), widened(dinp), tol_of<E>(), g_dinp.guards());
    t.compare("rmsnorm_backward", p, shape, "dweight", g_dw.values(), widened(dw), kFp32, g_dw.guards());
  });
}

// rope in both directions, out of place (channels past the rotated heads keep their values)
// and in place, as the model runs it on qkv.
template <class E>
void rope_rows(Table& t, model::Kernels& cpu, const Shape& s) {
  const char* p = precision_of<E>();
  const int B = s.B, T = s.T, H = s.NH + s.KVH, HS = s.HS, W = s.W();
  const std::size_t n = std::size_t(B) * T * W;
  const std::string shape = label(s);
  const auto cs = rope_table(T + 5, HS, 500000.0);
  const Guarded<float> g_cs(cs);
  for (const bool backward : {false, true}) {
    const char* op = backward ? "rope_backward" : "rope_forward";
    auto run = [&](auto& k, auto* out, const auto* inp, const float* table) {
      if (backward)
        k.rope_backward(out, inp, table, B, T, H, HS, W);
      else
        k.rope_forward(out, inp, table, B, T, H, HS, W);
    };
    run_case(t, op, p, shape, [&] {
      auto inp = random_floats(n, 81), keep = random_floats(n, 82);
      round_as<E>(inp);
      round_as<E>(keep);
      std::vector<float> want = keep;
      run(cpu, want.data(), inp.data(), cs.data());
      Guarded<E> g_inp(store_as<E>(inp)), g_out(store_as<E>(keep));
      if (backward)
        cuda::rope_backward(g_out.dev(), g_inp.dev(), g_cs.dev(), B, T, H, HS, W);
      else
        cuda::rope_forward(g_out.dev(), g_inp.dev(), g_cs.dev(), B, T, H, HS, W);
      t.compare(op, p, shape, "out", g_out.values(), widened(want), tol_of<E>(), g_out.guards());
      Guarded<E> g_inplace(store_as<E>(inp));
      if (backward)
        cuda::rope_backward(g_inplace.dev(), g_inplace.dev(), g_cs.dev(), B, T, H, HS, W);
      else
        cuda::rope_forward(g_inplace.dev(), g_inplace.dev(), g_cs.dev(), B, T, H, HS, W);
      std::vector<float> want_inplace = inp;
      run(cpu, want_inplace.data(), want_inplace.data(), cs.data());
      t.compare(op, p, shape, "out in place", g_inplace.values(), widened(want_inplace), tol_of<E>(),
                g_inplace.guards());
    });
  }
}

template <class E>
void swiglu_rows(Table& t, model::Kernels& cpu, const Shape& s) {
  const char* p = precision_of<E>();
  const int N = s.N(), F = s.F;
  const std::string shape = label(s);
  auto inp = random_floats(std::size_t(N) * 2 * F, 91, -6.f, 6.f), dout = random_floats(std::size_t(N) * F, 92);
  round_as<E>(inp);
  round_as<E>(dout);
  std::vector<float> out(std::size_t(N) * F), dinp(inp.size());
  cpu.swiglu_forward(out.data(), inp.data(), N, F);
  cpu.swiglu_backward(dinp.data(), inp.data(), dout.data(), N, F);
  const Guarded<E> g_inp(store_as<E>(inp)), g_dout(store_as<E>(dout));
  run_case(t, "swiglu_forward", p, shape, [&] {
    auto g_out = Guarded<E>::poisoned(out.size());
    cuda::swiglu_forward(g_out.dev(), g_inp.dev(), N, F);
    t.compare("swiglu_forward", p, shape, "out", g_out.values(), widened(out), tol_of<E>(), g_out.guards());
  });
  run_case(t, "swiglu_backward", p, shape, [&] {
    auto g_dinp = Guarded<E>::poisoned(dinp.size());
    cuda::swiglu_backward(g_dinp.dev(), g_inp.dev(), g_dout.dev(), N, F);
    t.compare("swiglu_backward", p, shape, "dinp", g_dinp.values(), widened(dinp), tol_of<E>(), g_dinp.guards());
  });
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// Two runs of each op from the same state, bit for bit, at Llama 1B layer sizes (B*T = 4096,
// C = 2048, 32 + 8 heads of 64, F = 5632).
template <class E>
void check_repeatable(const char* precision) {
  INFO(precision);
  const int N = 4096, C = 2048, B = 2, T = 2048, H = 40, HS = 64, W = 48 * 64, F = 5632;
  auto inp = random_floats(std::size_t(N) * C, 101, -3.f, 3.f), w = random_floats(C, 102);
  auto dout = random_floats(std::size_t(N) * C, 103), rstd = random_floats(N, 104, 0.5f, 2.f);
  Guarded<E> g_inp(store_as<E>(inp)), g_w(store_as<E>(w)), g_dout(store_as<E>(dout));
  Guarded<float> g_rstd(rstd);
  std::vector<std::vector<E>> dinp(2), y(2), d(2);
  std::vector<std::vector<float>> dw(2);
  for (int run = 0; run < 2; ++run) {
    Guarded<E> g_dinp(store_as<E>(dout));
    Guarded<float> g_dw(std::vector<float>(C, 0.25f));
    cuda::rmsnorm_backward(g_dinp.dev(), g_dw.dev(), g_dout.dev(), g_inp.dev(), g_w.dev(), g_rstd.dev(), N, C);
    dinp[run] = g_dinp.download();
    dw[run] = g_dw.download();
  }
  CHECK(same_bits(dinp[0], dinp[1]));
  CHECK(same_bits(dw[0], dw[1]));
  const Guarded<float> g_cs(rope_table(T, HS, 500000.0));
  const auto qkv = store_as<E>(random_floats(std::size_t(B) * T * W, 105));
  for (int run = 0; run < 2; ++run) {
    Guarded<E> g(qkv);
    cuda::rope_forward(g.dev(), g.dev(), g_cs.dev(), B, T, H, HS, W);
    cuda::rope_backward(g.dev(), g.dev(), g_cs.dev(), B, T, H, HS, W);
    y[run] = g.download();
  }
  CHECK(same_bits(y[0], y[1]));
  const Guarded<E> g_gu(store_as<E>(random_floats(std::size_t(N) * 2 * F, 106))),
      g_dh(store_as<E>(random_floats(std::size_t(N) * F, 107)));
  for (int run = 0; run < 2; ++run) {
    auto g = Guarded<E>::poisoned(std::size_t(N) * 2 * F);
    cuda::swiglu_backward(g.dev(), g_gu.dev(), g_dh.dev(), N, F);
    d[run] = g.download();
  }
  CHECK(same_bits(d[0], d[1]));
}

}  // namespace

TEST_CASE("parity table: rmsnorm, rope and swiglu against the CPU twin", "[cuda][parity][llama]") {
  if (!gpu_or_skip()) return;
  auto backend = backends::make_backend(backends::Device::kCpu);
  model::Kernels& cpu = *backend.kernels;
  Table table;
  for (const Shape& s : shapes()) {
    rmsnorm_rows<float>(table, cpu, s);
    rmsnorm_rows<model::bf16>(table, cpu, s);
    rope_rows<float>(table, cpu, s);
    rope_rows<model::bf16>(table, cpu, s);
    swiglu_rows<float>(table, cpu, s);
    swiglu_rows<model::bf16>(table, cpu, s);
  }
  table.print();
  for (const Row& r : table.rows()) {
    INFO(format_row(r));
    CHECK(r.ok());
  }
}

TEST_CASE("rmsnorm_backward, rope and swiglu_backward repeat bit for bit", "[cuda][parity][llama]") {
  if (!gpu_or_skip()) return;
  check_repeatable<float>("fp32");
  check_repeatable<model::bf16>("bf16");
  std::printf("determinism: rmsnorm_backward, rope, swiglu_backward (fp32, bf16): two runs compared bit for bit\n");
}
