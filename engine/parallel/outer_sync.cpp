#include "engine/parallel/outer_sync.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "engine/plan/replicas.hpp"

namespace holmes::parallel {

namespace {

constexpr size_t kChunk = plan::kOuterChunk;

size_t chunks(size_t n) { return (n + kChunk - 1) / kChunk; }

uint16_t to_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  const uint32_t bias = 0x7FFFu + ((u >> 16) & 1u);  // round to nearest, ties to even
  return static_cast<uint16_t>((u + bias) >> 16);
}

float from_bf16(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

}  // namespace

size_t outer_payload_size(spec::OuterDtype dtype, size_t n) {
  const size_t raw = static_cast<size_t>(plan::outer_payload_bytes(dtype, static_cast<double>(n)));
  return (raw + 3) / 4 * 4;
}

void outer_encode(spec::OuterDtype dtype, const float* x, size_t n, std::byte* out) {
  std::memset(out, 0, outer_payload_size(dtype, n));
  switch (dtype) {
    case spec::OuterDtype::kFp32: std::memcpy(out, x, n * 4); return;
    case spec::OuterDtype::kBf16:
      for (size_t i = 0; i < n; ++i) {
        const uint16_t h = to_bf16(x[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    case spec::OuterDtype::kInt8: {
      // [chunks(n) fp32 scales][n int8]: symmetric, scale = max |x| / 127 per chunk.
      float* scales = reinterpret_cast<float*>(out);
      auto* q = reinterpret_cast<int8_t*>(out + 4 * chunks(n));
      for (size_t c = 0; c < chunks(n); ++c) {
        const size_t b = c * kChunk, e = std::min(n, b + kChunk);
        float amax = 0;
        for (size_t i = b; i < e; ++i) amax = std::max(amax, std::fabs(x[i]));
        const float scale = amax / 127.0f;
        scales[c] = scale;
        for (size_t i = b; i < e; ++i)
          q[i] = scale > 0 ? static_cast<int8_t>(std::clamp(std::lround(x[i] / scale), -127L, 127L)) : 0;
      }
      return;
    }
  }
}

void outer_decode_add(spec::OuterDtype dtype, const std::byte* in, size_t n, float* out) {
  switch (dtype) {
    case spec::OuterDtype::kFp32: {
      const float* x = reinterpret_cast<const float*>(in);
      for (size_t i = 0; i < n; ++i) out[i] += x[i];
      return;
    }
    case spec::OuterDtype::kBf16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, in + 2 * i, 2);
        out[i] += from_bf16(h);
      }
      return;
    case spec::OuterDtype::kInt8: {
      const float* scales = reinterpret_cast<const float*>(in);
      const auto* q = reinterpret_cast<const int8_t*>(in + 4 * chunks(n));
      for (size_t i = 0; i < n; ++i) out[i] += scales[i / kChunk] * static_cast<float>(q[i]);
      return;
    }
  }
}

OuterSync::OuterSync(const OuterConfig& config, Group& outer, Group& dp, size_t size)
    : config_(config), outer_(outer), dp_(dp), size_(size) {
  if (config.inner_steps < 1 || config.fragments < 1 || config.fragments > config.inner_steps)
    throw std::invalid_argument(fmt::format("OuterSync: {} fragments over {} inner steps", config.fragments,
                                            config.inner_steps));
  size_t off = 0, owned = 0;
  for (int f = 0; f < config.fragments; ++f) {
    packed_.push_back(off);
    owned_at_.push_back(owned);
    off += slice(f).second - slice(f).first;
    owned += part(f);
  }
  anchor_.assign(off, 0.0f);
  momentum_.assign(off, 0.0f);
  residual_.assign(off, 0.0f);
  owner_residual_.assign(owned, 0.0f);
}

size_t OuterSync::padded(int f) const {
  const auto [b, e] = fragment(f);
  const size_t dp = static_cast<size_t>(dp_.size());
  return (e - b + dp - 1) / dp;
}

size_t OuterSync::part(int f) const {
  return static_cast<size_t>(plan::outer_part(static_cast<double>(padded(f)), outer_.size()));
}

std::pair<size_t, size_t> OuterSync::fragment(int f) const {
  const size_t F = static_cast<size_t>(config_.fragments);
  return {size_ * f / F, size_ * (f + 1) / F};
}

std::pair<size_t, size_t> OuterSync::slice(int f) const {
  const auto [b, e] = fragment(f);
  const size_t dp = static_cast<size_t>(dp_.size()), d = static_cast<size_t>(dp_.rank());
  const size_t c = (e - b + dp - 1) / dp;
  return {std::min(e, b + d * c), std::min(e, b + (d + 1) * c)};
}

std::vector<int> OuterSync::due(int64_t done) const {
  std::vector<int> out;
  if (done <= 0) return out;
  const int64_t H = config_.inner_steps, F = config_.fragments;
  for (int f = 0; f < config_.fragments; ++f)
    if (done % H == ((f + 1) * H / F) % H) out.push_back(f);
  return out;
}

void OuterSync::reset(const float* params) {
  for (int f = 0; f < config_.fragments; ++f) {
    const auto [b, e] = slice(f);
    std::copy(params + b, params + e, anchor_.begin() + static_cast<std::ptrdiff_t>(packed_[f]));
  }
  std::fill(momentum_.begin(), momentum_.end(), 0.0f);
  std::fill(residual_.begin(), residual_.end(), 0.0f);
  std::fill(owner_residual_.begin(), owner_residual_.end(), 0.0f);
}

std::vector<float> OuterSync::state() const {
  std::vector<float> out;
  out.reserve(state_floats());
  for (const auto* v : {&anchor_, &momentum_, &residual_, &owner_residual_}) out.insert(out.end(), v->begin(), v->end());
  return out;
}

void OuterSync::load(std::span<const float> state) {
  if (state.size() != state_floats())
    throw std::invalid_argument(fmt::format("OuterSync: outer state of {} floats, this rank keeps {} (3 x {} + {})",
                                            state.size(), state_floats(), anchor_.size(), owner_residual_.size()));
  const float* p = state.data();
  for (auto* v : {&anchor_, &momentum_, &residual_, &owner_residual_}) {
    std::copy(p, p + v->size(), v->begin());
    p += v->size();
  }
}

int OuterSync::after_step(int64_t done, float* params) {
  const std::vector<int> fragments = due(done);
  for (int f : fragments) sync_fragment(f, params);
  return static_cast<int>(fragments.size());
}

void OuterSync::sync_fragment(int f, float* params) {
  const auto [fb, fe] = fragment(f);
  const auto [b, e] = slice(f);
  const size_t dp = static_cast<size_t>(dp_.size());
  const size_t c = padded(f);  // every slice padded to c
  const size_t len = e - b;
  const int n = outer_.size(), me = outer_.rank();
  const size_t p = part(f);  // owner k owns [k p, (k + 1) p) of the padded slice (zero past c)
  float* anchor = anchor_.data() + packed_[f];
  float* mom = momentum_.data() + packed_[f];
  float* residual = residual_.data() + packed_[f];
  float* owner_residual = owner_residual_.data() + owned_at_[f];
  const spec::OuterDtype dtype = config_.dtype;
  const bool lossy = dtype != spec::OuterDtype::kFp32;
  const size_t words = outer_payload_size(dtype, p) / 4;  // one part's payload
  auto bytes_of = [](std::vector<float>& v, size_t word) { return reinterpret_cast<std::byte*>(v.data() + word); };
  // 1. The outer gradient of this slice (zero padding past its end), plus what the previous
  // payload's rounding left out; encoded part by part (each part its own int8 scales).
  delta_.assign(p * n, 0.0f);
  for (size_t i = 0; i < len; ++i) delta_[i] = anchor[i] - params[b + i] + residual[i];
  wire_out_.assign(words * n, 0.0f);
  for (int k = 0; k < n; ++k) outer_encode(dtype, delta_.data() + p * k, p, bytes_of(wire_out_, words * k));
  if (lossy) {  // error feedback: what this member's payloads leave out
    own_.assign(p * n, 0.0f);
    for (int k = 0; k < n; ++k) outer_decode_add(dtype, bytes_of(wire_out_, words * k), p, own_.data() + p * k);
    for (size_t i = 0; i < len; ++i) residual[i] = delta_[i] - own_[i];
  }
  // 2. Part k to its owner k; this member receives its own part from every member (itself
  // included, without the wire), decodes and sums them in replica order, / N.
  wire_in_.assign(words * n, 0.0f);
  std::copy_n(wire_out_.begin() + static_cast<std::ptrdiff_t>(words * me), words,
              wire_in_.begin() + static_cast<std::ptrdiff_t>(words * me));
  if (n > 1) {
    std::vector<Transfer> ops;
    for (int k = 0; k < n; ++k) {
      if (k == me) continue;
      ops.push_back({Transfer::kSend, Buf::f32(wire_out_.data() + words * k, words), k, kOuterTag});
      ops.push_back({Transfer::kRecv, Buf::f32(wire_in_.data() + words * k, words), k, kOuterTag});
    }
    Work w = outer_.send_recv(ops);
    w.land();
    // land() hands the receives on while sends may still read wire_out_, reused below.
    if (const std::shared_future<void> sent = w.inputs_free(); sent.valid()) sent.get();  // rethrows a failed send
    bytes_sent_ += static_cast<double>(words) * 4 * (n - 1);
  }
  sum_.assign(p, 0.0f);
  for (int r = 0; r < n; ++r) outer_decode_add(dtype, bytes_of(wire_in_, words * r), p, sum_.data());
  // 3. The owner encodes the average once (with its own error feedback), and every member
  // all-gathers the owners' payloads: every replica decodes the same bytes.
  const float inv_n = 1.0f / static_cast<float>(n);
  for (size_t i = 0; i < p; ++i) sum_[i] = sum_[i] * inv_n + owner_residual[i];
  wire_in_.assign(words, 0.0f);
  outer_encode(dtype, sum_.data(), p, bytes_of(wire_in_, 0));
  wire_out_.assign(words * n, 0.0f);
  if (n > 1) {
    outer_.all_gather(Buf::f32(wire_out_.data(), wire_out_.size()), Buf::f32(wire_in_.data(), words)).land();
    bytes_sent_ += static_cast<double>(words) * 4 * (n - 1);
  } else {
    std::copy(wire_in_.begin(), wire_in_.end(), wire_out_.begin());
  }
  average_.assign(p * n, 0.0f);
  for (int k = 0; k < n; ++k) outer_decode_add(dtype, bytes_of(wire_out_, words * k), p, average_.data() + p * k);
  if (lossy)
    for (size_t i = 0; i < p; ++i) owner_residual[i] = sum_[i] - average_[p * me + i];
  // 4. Nesterov SGD on the anchor; the slice's weights become it.
  const float lr = static_cast<float>(config_.lr), mu = static_cast<float>(config_.momentum);
  for (size_t i = 0; i < len; ++i) {
    const float g = average_[i];
    mom[i] = mu * mom[i] + g;
    anchor[i] -= lr * (g + mu * mom[i]);
    params[b + i] = anchor[i];
  }
  // 5. The replica's data-parallel ranks exchange their slices.
  if (dp > 1) {
    gathered_slice_.assign(c, 0.0f);
    std::copy(params + b, params + e, gathered_slice_.begin());
    dp_.all_gather(Buf::f32(params + fb, fe - fb), Buf::f32(gathered_slice_.data(), c)).land();
  }
}

}  // namespace holmes::parallel
