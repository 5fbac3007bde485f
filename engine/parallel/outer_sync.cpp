#include "engine/parallel/outer_sync.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <stdexcept>
#include <utility>

#include "engine/parallel/cpu_clock.hpp"
#include "engine/schedule/outer_payload.hpp"

namespace holmes::parallel {

namespace {

constexpr size_t kChunk = schedule::kOuterChunk;

size_t chunks(size_t n) { return (n + kChunk - 1) / kChunk; }

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

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

void outer_encode(spec::OuterDtype dtype, const float* x, size_t n, std::byte* out) {
  std::memset(out, 0, schedule::outer_payload_size(dtype, n));
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

std::string OuterTimes::describe() const {
  std::string parts;
  for (const auto& [name, ms] : this->parts()) {
    std::string label(name);
    std::replace(label.begin(), label.end(), '_', ' ');
    if (label == "dp gather") label = "data-parallel all-gather";
    if (label == "gather") label = "all-gather";
    parts += fmt::format("{}{} {:.1f}", parts.empty() ? "" : " + ", label, ms);
  }
  return fmt::format("{:.1f} ms = {} ms; CPU {:.1f} ms (all threads); {:.3g} MB sent", total_ms, parts, cpu_ms,
                     bytes / 1e6);
}

OuterSync::OuterSync(const OuterConfig& config, Group& outer, Group& dp, size_t size, Group* side)
    : config_(config), outer_(outer), dp_(dp), side_(side), size_(size), n_(outer.size()), me_(outer.rank()) {
  if (config.inner_steps < 1 || config.fragments < 1 || config.fragments > config.inner_steps)
    throw std::invalid_argument(fmt::format("OuterSync: {} fragments over {} inner steps", config.fragments,
                                            config.inner_steps));
  if (config.overlap < 0 || config.overlap >= config.inner_steps / config.fragments)
    throw std::invalid_argument(fmt::format("OuterSync: overlap {} with {} fragments over {} inner steps (below {})",
                                            config.overlap, config.fragments, config.inner_steps,
                                            config.inner_steps / config.fragments));
  if (config.overlap > 0 && n_ > 1 && (side == nullptr || side->size() != n_ || side->rank() != me_))
    throw std::invalid_argument("OuterSync: overlap needs the side group of the outer group's members");
  size_t off = 0, owned = 0;
  for (int f = 0; f < config.fragments; ++f) {
    packed_.push_back(off);
    owned_at_.push_back(owned);
    const size_t len = slice(f).second - slice(f).first;
    off += len;
    owned += part(f);
    max_slice_ = std::max(max_slice_, len);
  }
  anchor_.assign(off, 0.0f);
  momentum_.assign(off, 0.0f);
  residual_.assign(off, 0.0f);
  owner_residual_.assign(owned, 0.0f);
}

OuterSync::~OuterSync() {
  try {
    land();
  } catch (...) {  // the step that would have applied it reports failures; nothing to undo here
  }
}

size_t OuterSync::padded(int f) const {
  const auto [b, e] = fragment(f);
  const size_t dp = static_cast<size_t>(dp_.size());
  return (e - b + dp - 1) / dp;
}

size_t OuterSync::part(int f) const {
  return static_cast<size_t>(schedule::outer_part(static_cast<double>(padded(f)), n_));
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
  land();
  pending_ = {};
  exchange_ = {};
  for (int f = 0; f < config_.fragments; ++f) {
    const auto [b, e] = slice(f);
    std::copy(params + b, params + e, anchor_.begin() + static_cast<std::ptrdiff_t>(packed_[f]));
  }
  std::fill(momentum_.begin(), momentum_.end(), 0.0f);
  std::fill(residual_.begin(), residual_.end(), 0.0f);
  std::fill(owner_residual_.begin(), owner_residual_.end(), 0.0f);
}

void OuterSync::land() {
  Work w = std::exchange(pending_.work, Work{});
  w.land();  // rethrows the exchange's failure (a replica lost), naming the peer
}

namespace {

// Steps travel in the float state as two exact halves (each < 2^24).
constexpr double kHalf = 65536.0 * 256;

}  // namespace

std::vector<float> OuterSync::state() const {
  if (pending_.work.pending() && pending_.f >= 0)
    throw std::logic_error("OuterSync::state with an exchange in flight: land() first");
  std::vector<float> out;
  out.reserve(state_floats());
  for (const auto* v : {&anchor_, &momentum_, &residual_, &owner_residual_}) out.insert(out.end(), v->begin(), v->end());
  if (config_.overlap > 0) {
    const bool waiting = pending_.f >= 0;
    const double at = waiting ? static_cast<double>(pending_.apply_at) : 0;
    out.push_back(waiting ? 1.0f : 0.0f);
    out.push_back(waiting ? static_cast<float>(pending_.f) : 0.0f);
    out.push_back(static_cast<float>(std::floor(at / kHalf)));
    out.push_back(static_cast<float>(std::fmod(at, kHalf)));
    const size_t len = waiting ? pending_.sent.size() : 0;
    std::vector<float> sent(max_slice_, 0.0f), average(max_slice_, 0.0f);
    if (waiting) {
      std::copy_n(pending_.sent.begin(), len, sent.begin());
      std::copy_n(average_.begin(), len, average.begin());
    }
    out.insert(out.end(), sent.begin(), sent.end());
    out.insert(out.end(), average.begin(), average.end());
  }
  return out;
}

void OuterSync::load(std::span<const float> state) {
  if (state.size() != state_floats())
    throw std::invalid_argument(fmt::format("OuterSync: outer state of {} floats, this rank keeps {} (3 x {} + {}{})",
                                            state.size(), state_floats(), anchor_.size(), owner_residual_.size(),
                                            config_.overlap > 0 ? fmt::format(" + 4 + 2 x {}", max_slice_) : ""));
  land();
  const float* p = state.data();
  for (auto* v : {&anchor_, &momentum_, &residual_, &owner_residual_}) {
    std::copy(p, p + v->size(), v->begin());
    p += v->size();
  }
  pending_ = {};
  exchange_ = {};
  if (config_.overlap > 0 && p[0] == 1.0f) {
    const int f = static_cast<int>(p[1]);
    if (f < 0 || f >= config_.fragments)
      throw std::invalid_argument(fmt::format("OuterSync: outer state names fragment {} of {}", f, config_.fragments));
    const size_t len = slice(f).second - slice(f).first;
    pending_.f = f;
    pending_.apply_at = static_cast<int64_t>(static_cast<double>(p[2]) * kHalf + static_cast<double>(p[3]));
    pending_.sent.assign(p + 4, p + 4 + len);
    average_.assign(p + 4 + max_slice_, p + 4 + max_slice_ + len);
  }
}

int OuterSync::after_step(int64_t done, float* params) {
  const auto start = Clock::now();
  const double cpu0 = process_cpu_ms();
  if (pending_.f >= 0 && pending_.apply_at == done) {
    const auto t = Clock::now();
    land();
    times_.wait_ms += ms_since(t);  // what the tau steps did not hide
    take_exchange();
    apply(pending_.f, params, pending_.sent.data());
    ++times_.applied;
    pending_ = {};
  }
  const std::vector<int> fragments = due(done);
  for (int f : fragments) {
    if (config_.overlap == 0 || n_ == 1) {
      exchange_fragment(f, params);
      apply_fragment(f, params);
      continue;
    }
    prepare(f, params);
    ++times_.syncs;
    if (pending_.f >= 0)
      throw std::logic_error(fmt::format("OuterSync: fragment {} due after step {} with fragment {} in flight", f, done,
                                         pending_.f));
    const auto [b, e] = slice(f);
    pending_.f = f;
    pending_.apply_at = done + config_.overlap;
    pending_.sent.assign(params + b, params + e);
    exchange_ = {};
    pending_.work = side_->run_host([this](comm::ProcessGroup& pg) { exchange(&pg); });
  }
  times_.total_ms += ms_since(start);
  times_.cpu_ms += process_cpu_ms() - cpu0;
  return static_cast<int>(fragments.size());
}

double OuterSync::take_exchange() {
  const OuterTimes x = std::exchange(exchange_, OuterTimes{});
  times_.to_owners_ms += x.to_owners_ms, times_.average_ms += x.average_ms;
  times_.gather_ms += x.gather_ms, times_.decode_ms += x.decode_ms;
  if (x.bytes > 0) {
    wire_.seconds += (x.to_owners_ms + x.gather_ms) / 1e3;
    wire_.bytes += x.bytes;
    ++wire_.exchanges;
  }
  return x.exchange_ms();
}

void OuterSync::exchange_fragment(int f, const float* params) {
  if (config_.overlap > 0 && n_ > 1)
    throw std::logic_error("OuterSync::exchange_fragment with parallel.outer_overlap: the exchange runs beside the steps");
  prepare(f, params);
  ++times_.syncs;
  const auto t = Clock::now();
  if (n_ > 1)
    outer_.run_host([this](comm::ProcessGroup& pg) { exchange(&pg); }).land();
  else
    exchange(nullptr);
  const double waited = ms_since(t);
  times_.wait_ms += std::max(0.0, waited - take_exchange());  // the hand-off there and back
}

void OuterSync::apply_fragment(int f, float* params) {
  apply(f, params, nullptr);
  ++times_.applied;
}

void OuterSync::restore(const Residuals& r) {
  if (r.residual.size() != residual_.size() || r.owner_residual.size() != owner_residual_.size())
    throw std::logic_error("OuterSync::restore: residuals of another layout");
  residual_ = r.residual;
  owner_residual_ = r.owner_residual;
  exchange_ = {};
}

void OuterSync::adopt(const OuterSync& old) {
  if (old.anchor_.size() != anchor_.size() || old.pending_.f >= 0 || pending_.f >= 0)
    throw std::logic_error(fmt::format("OuterSync::adopt: {} anchor floats from {} here, or an exchange in flight",
                                       old.anchor_.size(), anchor_.size()));
  anchor_ = old.anchor_;
  momentum_ = old.momentum_;
  residual_ = old.residual_;
  std::fill(owner_residual_.begin(), owner_residual_.end(), 0.0f);
  bytes_sent_ = old.bytes_sent_;
  times_ = old.times_;
  wire_ = old.wire_;
}

void OuterSync::prepare(int f, const float* params) {
  const auto start = Clock::now();
  const auto [b, e] = slice(f);
  const size_t len = e - b, p = part(f);
  float* anchor = anchor_.data() + packed_[f];
  float* residual = residual_.data() + packed_[f];
  const spec::OuterDtype dtype = config_.dtype;
  cur_f_ = f;
  cur_p_ = p;
  cur_words_ = schedule::outer_payload_size(dtype, p) / 4;  // one part's payload
  // 1. The outer gradient of this slice (zero padding past its end), plus what the previous
  // payload's rounding left out; encoded part by part (each part its own int8 scales).
  delta_.assign(p * n_, 0.0f);
  for (size_t i = 0; i < len; ++i) delta_[i] = anchor[i] - params[b + i] + residual[i];
  wire_out_.assign(cur_words_ * n_, 0.0f);
  for (int k = 0; k < n_; ++k)
    outer_encode(dtype, delta_.data() + p * k, p, reinterpret_cast<std::byte*>(wire_out_.data() + cur_words_ * k));
  if (dtype != spec::OuterDtype::kFp32) {  // error feedback: what this member's payloads leave out
    own_.assign(p * n_, 0.0f);
    for (int k = 0; k < n_; ++k)
      outer_decode_add(dtype, reinterpret_cast<const std::byte*>(wire_out_.data() + cur_words_ * k), p,
                       own_.data() + p * k);
    for (size_t i = 0; i < len; ++i) residual[i] = delta_[i] - own_[i];
  }
  if (n_ > 1) {
    const double sent = 2.0 * static_cast<double>(cur_words_) * 4 * (n_ - 1);
    bytes_sent_ += sent;
    times_.bytes += sent;
  }
  times_.encode_ms += ms_since(start);
}

void OuterSync::exchange(comm::ProcessGroup* pg) {
  const size_t p = cur_p_, words = cur_words_;
  const int n = n_, me = me_;
  const spec::OuterDtype dtype = config_.dtype;
  float* owner_residual = owner_residual_.data() + owned_at_[cur_f_];
  auto bytes_of = [](const std::vector<float>& v, size_t word) {
    return reinterpret_cast<const std::byte*>(v.data() + word);
  };
  // Each part's wall time into exchange_ (read by the training thread once this has landed).
  auto t = Clock::now();
  auto lap = [&t](double& into) {
    into += ms_since(t);
    t = Clock::now();
  };
  // 2. Part k to its owner k; this member receives its own part from every member (itself
  // included, without the wire), decodes and sums them in replica order, / N.
  wire_in_.assign(words * n, 0.0f);
  std::copy_n(wire_out_.begin() + static_cast<std::ptrdiff_t>(words * me), words,
              wire_in_.begin() + static_cast<std::ptrdiff_t>(words * me));
  // In N - 1 rounds, round j sending to member me + j and receiving from me - j: one flow into
  // and one out of each member at a time, as the ring the plan prices. Posting all N - 1 at
  // once made N - 1 senders burst into each member's link together (incast: on a thin,
  // shaped link the losses cost more than the rounds' latency).
  if (pg != nullptr && n > 1) {
    exchange_.bytes = 2.0 * static_cast<double>(words) * 4 * (n - 1);  // both halves, on the wire
    for (int j = 1; j < n; ++j) {
      const int to = (me + j) % n, from = (me - j + n) % n;
      const comm::P2POp ops[2] = {{comm::P2POp::kSend, {wire_out_.data() + words * to, words}, to, kOuterTag},
                                  {comm::P2POp::kRecv, {wire_in_.data() + words * from, words}, from, kOuterTag}};
      pg->send_recv(ops);  // returns once both are done
    }
  }
  lap(exchange_.to_owners_ms);
  sum_.assign(p, 0.0f);
  for (int r = 0; r < n; ++r) outer_decode_add(dtype, bytes_of(wire_in_, words * r), p, sum_.data());
  // 3. The owner encodes the average once (with its own error feedback), and every member
  // all-gathers the owners' payloads: every replica decodes the same bytes.
  const float inv_n = 1.0f / static_cast<float>(n);
  for (size_t i = 0; i < p; ++i) sum_[i] = sum_[i] * inv_n + owner_residual[i];
  mine_.assign(words, 0.0f);
  outer_encode(dtype, sum_.data(), p, reinterpret_cast<std::byte*>(mine_.data()));
  gathered_.assign(words * n, 0.0f);
  lap(exchange_.average_ms);
  if (pg != nullptr && n > 1)
    pg->all_gather(gathered_, mine_);
  else
    std::copy(mine_.begin(), mine_.end(), gathered_.begin());
  lap(exchange_.gather_ms);
  average_.assign(p * n, 0.0f);
  for (int k = 0; k < n; ++k) outer_decode_add(dtype, bytes_of(gathered_, words * k), p, average_.data() + p * k);
  if (dtype != spec::OuterDtype::kFp32)
    for (size_t i = 0; i < p; ++i) owner_residual[i] = sum_[i] - average_[p * me + i];
  lap(exchange_.decode_ms);
}

void OuterSync::apply(int f, float* params, const float* sent) {
  auto t = Clock::now();
  const auto [fb, fe] = fragment(f);
  const auto [b, e] = slice(f);
  const size_t len = e - b, c = padded(f);
  float* anchor = anchor_.data() + packed_[f];
  float* mom = momentum_.data() + packed_[f];
  // 4. Nesterov SGD on the anchor (the same bits on every replica); the slice's weights become
  // it, plus (overlap) this replica's progress since it sent.
  const float lr = static_cast<float>(config_.lr), mu = static_cast<float>(config_.momentum);
  for (size_t i = 0; i < len; ++i) {
    const float g = average_[i];
    mom[i] = mu * mom[i] + g;
    anchor[i] -= lr * (g + mu * mom[i]);
    params[b + i] = sent ? anchor[i] + (params[b + i] - sent[i]) : anchor[i];
  }
  times_.outer_step_ms += ms_since(t);
  t = Clock::now();
  // 5. The replica's data-parallel ranks exchange their slices.
  if (dp_.size() > 1) {
    gathered_slice_.assign(c, 0.0f);
    std::copy(params + b, params + e, gathered_slice_.begin());
    dp_.all_gather(Buf::f32(params + fb, fe - fb), Buf::f32(gathered_slice_.data(), c)).land();
  }
  times_.dp_gather_ms += ms_since(t);
}

}  // namespace holmes::parallel
