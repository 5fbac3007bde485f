// The parity-table harness (as ggml's test-backend-ops): a CUDA op and its CPU twin run on
// the same random inputs (bf16 inputs rounded on the host first, so the CPU reference sees
// exactly what the GPU sees); every device buffer sits between two guard regions that must
// come back unchanged, outputs start as NaN (accumulating outputs as random values), and each
// output gives one table row: op, precision, shape, output, max normalized error, tolerance,
// ok. Op families add rows through Table::compare; the GPU session pastes Table::print.
//
// The host half (normalized_error, guard images, rows) needs no GPU and is tested in
// parity_harness_test.cpp; Guarded<T> is the device half.
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "cuda/device_buffer.hpp"
#include "model/bf16.hpp"

namespace holmes::cuda::parity {

// ---- host half ----

// Bytes before and after every buffer: a multiple of 256 keeps the data as aligned as
// cudaMalloc's, so the 16-byte vector paths are the ones tested (misaligned pointers have
// their own tests).
constexpr std::size_t kGuardBytes = 256;
constexpr std::uint8_t kGuardByte = 0xA5;
constexpr std::uint8_t kPoisonByte = 0xFF;  // all-ones: NaN as fp32, bf16 and double

// max_i |got_i - want_i| / (|want_i| + mean_j |want_j|): relative where an element is large,
// relative to the output's typical magnitude where it is small (so a wrong small element
// still counts). A non-finite got, or a size mismatch, is infinite error. An infinite want
// (a row max of padding only) must be met exactly and stays out of the mean; a NaN want is a
// broken reference and fails (left in, it would make the mean and every ratio NaN, which
// fmax skips: the row would pass whatever the GPU wrote).
inline double normalized_error(const std::vector<double>& got, const std::vector<double>& want) {
  if (got.size() != want.size()) return INFINITY;
  double scale = 0;
  std::size_t finite = 0;
  for (double w : want)
    if (std::isfinite(w)) scale += std::fabs(w), ++finite;
  scale = finite == 0 ? 0 : scale / double(finite);
  if (scale == 0) scale = 1e-30;
  double worst = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(want[i])) {
      if (!(got[i] == want[i])) return INFINITY;  // NaN == NaN is false: fails too
      continue;
    }
    if (!std::isfinite(got[i])) return INFINITY;
    worst = std::fmax(worst, std::fabs(got[i] - want[i]) / (std::fabs(want[i]) + scale));
  }
  return worst;
}

// [guard | data | guard] as bytes, with `data_bytes` of data (copied from `data`, or poison
// when data is null).
inline std::vector<std::uint8_t> guarded_image(const void* data, std::size_t data_bytes) {
  std::vector<std::uint8_t> image(data_bytes + 2 * kGuardBytes, kGuardByte);
  if (data != nullptr)
    std::memcpy(image.data() + kGuardBytes, data, data_bytes);
  else
    std::memset(image.data() + kGuardBytes, kPoisonByte, data_bytes);
  return image;
}

// "" when both guards of `image` still hold kGuardByte; else which guard changed, where and
// how many bytes.
inline std::string guard_problem(const std::vector<std::uint8_t>& image, std::size_t data_bytes) {
  if (image.size() != data_bytes + 2 * kGuardBytes) return "guarded image has the wrong size";
  std::string problem;
  auto scan = [&](std::size_t begin, const char* side) {
    std::size_t changed = 0, first = 0;
    for (std::size_t i = begin; i < begin + kGuardBytes; ++i)
      if (image[i] != kGuardByte && changed++ == 0) first = i - begin;
    if (changed)
      problem += std::string(problem.empty() ? "" : "; ") + std::to_string(changed) + " byte(s) of the guard " +
                 side + " the data changed, first at guard byte " + std::to_string(first);
  };
  scan(0, "before");
  scan(kGuardBytes + data_bytes, "after");
  return problem;
}

struct Row {
  std::string op, precision, shape, output;
  double error = INFINITY, tolerance = 0;
  std::string problem;  // guard damage, an exception: the row fails whatever the error
  bool ok() const { return problem.empty() && error <= tolerance; }
};

inline std::string format_row(const Row& r) {
  char num[64];
  std::snprintf(num, sizeof num, "%10.3e | %8.1e", r.error, r.tolerance);
  std::string line = "| " + r.op + " | " + r.precision + " | " + r.shape + " | " + r.output +
                     " | " + num + " | " + (r.ok() ? "ok" : "FAIL") + " |";
  if (!r.problem.empty()) line += " " + r.problem;
  return line;
}

class Table {
 public:
  void add(Row r) { rows_.push_back(std::move(r)); }
  // One row for `output` of op: normalized_error(got, want) against tol, plus the output's
  // guard problem ("" when intact).
  void compare(const std::string& op, const std::string& precision, const std::string& shape,
               const std::string& output, const std::vector<double>& got,
               const std::vector<double>& want, double tol, const std::string& guards) {
    add({op, precision, shape, output, normalized_error(got, want), tol,
         guards.empty() ? "" : output + ": " + guards});
  }
  // A case that threw: one failing row saying what.
  void fail(const std::string& op, const std::string& precision, const std::string& shape,
            const std::string& what) {
    add({op, precision, shape, "-", INFINITY, 0, "threw: " + what});
  }
  const std::vector<Row>& rows() const { return rows_; }
  void print(std::FILE* f = stdout) const {
    std::fprintf(f, "| op | precision | shape | output | max normalized error | tolerance | result |\n");
    std::fprintf(f, "| --- | --- | --- | --- | --- | --- | --- |\n");
    for (const Row& r : rows_) std::fprintf(f, "%s\n", format_row(r).c_str());
    std::fflush(f);
  }

 private:
  std::vector<Row> rows_;
};

// Storage conversions of the host values: T is float, model::bf16, int or double.
inline double widen(float x) { return x; }
inline double widen(model::bf16 x) { return model::bf16_to_float(x); }
inline double widen(int x) { return x; }
inline double widen(double x) { return x; }

template <class T>
std::vector<T> store_as(const std::vector<float>& v) {
  std::vector<T> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    if constexpr (std::is_same_v<T, model::bf16>)
      out[i] = model::float_to_bf16(v[i]);
    else
      out[i] = static_cast<T>(v[i]);
  }
  return out;
}

// Rounds v in place to what a buffer of T holds (bf16: nearest even), so the CPU reference
// computes on the values the GPU reads.
template <class T>
void round_as(std::vector<float>& v) {
  if constexpr (std::is_same_v<T, model::bf16>)
    for (float& x : v) x = model::bf16_to_float(model::float_to_bf16(x));
}

template <class T>
std::vector<double> widened(const std::vector<T>& v) {
  std::vector<double> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = widen(v[i]);
  return out;
}

template <class T>
const char* precision_of() {
  return std::is_same_v<T, model::bf16> ? "bf16" : "fp32";
}

// ---- device half ----

// The device type a kernel takes for host storage T.
template <class T>
using DeviceType = std::conditional_t<std::is_same_v<T, model::bf16>, __nv_bfloat16, T>;

// n elements of T on the device between two guard regions. Starts as `init` (inputs and
// accumulating outputs) or as poison (written outputs).
template <class T>
class Guarded {
 public:
  explicit Guarded(const std::vector<T>& init) : n_(init.size()) {
    upload(guarded_image(init.data(), bytes()));
  }
  static Guarded poisoned(std::size_t n) { return Guarded(n); }

  DeviceType<T>* dev() const {
    return reinterpret_cast<DeviceType<T>*>(buf_.as<std::uint8_t>() + kGuardBytes);
  }
  std::size_t size() const { return n_; }
  std::vector<T> download() const {
    std::vector<T> out(n_);
    const auto image = this->image();
    std::memcpy(out.data(), image.data() + kGuardBytes, bytes());
    return out;
  }
  std::vector<double> values() const { return widened(download()); }
  std::string guards() const { return guard_problem(image(), bytes()); }

 private:
  explicit Guarded(std::size_t n) : n_(n) { upload(guarded_image(nullptr, bytes())); }
  std::size_t bytes() const { return n_ * sizeof(T); }
  void upload(const std::vector<std::uint8_t>& image) {
    buf_ = DeviceBuffer(image.size());
    buf_.upload(image.data(), image.size());
  }
  std::vector<std::uint8_t> image() const {
    std::vector<std::uint8_t> image(bytes() + 2 * kGuardBytes);
    buf_.download(image.data(), image.size());  // synchronous: waits for queued kernels
    return image;
  }

  std::size_t n_;
  DeviceBuffer buf_;
};

// v stored `shift` elements into its buffer: a kernel given dev() + shift sees a pointer off
// the 16-byte grid (shift 1: 4 bytes off for fp32, 2 for bf16); shift 0 is plain Guarded(v).
template <class T>
Guarded<T> placed(const std::vector<T>& v, int shift) {
  std::vector<T> padded(v.size() + shift);
  std::copy(v.begin(), v.end(), padded.begin() + shift);
  return Guarded<T>(padded);
}

// The values of a placed() buffer from its shift on.
template <class T>
std::vector<double> placed_values(const Guarded<T>& g, int shift) {
  const auto v = g.values();
  return {v.begin() + shift, v.end()};
}

}  // namespace holmes::cuda::parity
