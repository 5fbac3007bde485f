// The optimizer's ops and small reductions on the GPU (cuda/optimizer.cu) against their CPU
// twins through model::Kernels, and the CUDA DeviceMemory: aligned and odd sizes, outputs
// poisoned with NaN before the call, guard elements after the range untouched. Skips
// without a GPU.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include "cuda/check.hpp"
#include "cuda/cuda_kernels.hpp"
#include "cuda/cuda_memory.hpp"
#include "cuda_test_util.hpp"
#include "backends/backends.hpp"

using namespace holmes;
using namespace holmes::cuda::test;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr size_t kGuard = 7;  // elements after each range that must not change

// A device copy of host, followed by kGuard guard values.
device::DeviceArray<float> upload_guarded(device::DeviceMemory& mem, const std::vector<float>& host) {
  device::DeviceArray<float> a(mem, host.size() + kGuard);
  std::vector<float> padded = host;
  padded.insert(padded.end(), kGuard, 123.25f);
  a.upload(padded);
  return a;
}

std::vector<float> download(const device::DeviceArray<float>& a) {
  std::vector<float> h(a.size());
  a.download(h);
  return h;
}

}  // namespace

TEST_CASE("CUDA adamw_update and the reductions match their CPU twins", "[cuda][kernels]") {
  if (!gpu_or_skip()) return;
  auto cpu_backend = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  model::Kernels& cpu = *cpu_backend.kernels;
  auto gpu = cuda::make_cuda_kernels();
  auto mem = cuda::make_device_memory();
  for (size_t n : {size_t{1}, size_t{31}, size_t{256}, size_t{1000}, size_t{65537}}) {
    INFO("n " << n);
    const auto p0 = random_floats(n, 11), g = random_floats(n, 12), m0 = random_floats(n, 13);
    auto v0 = random_floats(n, 14);
    for (float& x : v0) x = std::fabs(x);  // second moments are non-negative
    const model::AdamWStep s{.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .decay_factor = 0.999f,
                             .step_size = 0.01f, .inv_sqrt_bc2 = 3.1f, .grad_scale = 0.7f};
    std::vector<float> p = p0, m = m0, v = v0;
    cpu.adamw_update(p.data(), m.data(), v.data(), g.data(), n, s);
    auto dp = upload_guarded(*mem, p0), dm = upload_guarded(*mem, m0), dv = upload_guarded(*mem, v0);
    auto dg = upload_guarded(*mem, g);
    gpu->adamw_update(dp.data(), dm.data(), dv.data(), dg.data(), n, s);
    for (auto [dev, want] : {std::pair{&dp, &p}, std::pair{&dm, &m}, std::pair{&dv, &v}}) {
      const auto got = download(*dev);
      std::vector<double> w(want->begin(), want->end());
      CHECK(worst_ratio(std::vector<float>(got.begin(), got.begin() + n), w, 1e-6, 1e-5) <= 1.0);
      for (size_t i = n; i < got.size(); ++i) CHECK(got[i] == 123.25f);
    }

    // sum_squares accumulates into what is there; mean writes over a NaN.
    double cpu_sq = 2.5;
    cpu.sum_squares_forward(&cpu_sq, g.data(), n);
    device::DeviceArray<double> dsq(*mem, 1);
    const double start = 2.5;
    dsq.upload({&start, 1});
    gpu->sum_squares_forward(dsq.data(), dg.data(), n);
    double gpu_sq = 0;
    dsq.download({&gpu_sq, 1});
    CHECK(gpu_sq == Approx(cpu_sq).epsilon(1e-12));

    float cpu_mean = kNaN;
    cpu.mean_forward(&cpu_mean, g.data(), static_cast<int>(n));
    device::DeviceArray<float> dmean(*mem, 1);
    dmean.upload({&kNaN, 1});
    gpu->mean_forward(dmean.data(), dg.data(), static_cast<int>(n));
    float gpu_mean = 0;
    dmean.download({&gpu_mean, 1});
    CHECK(gpu_mean == Approx(cpu_mean).epsilon(1e-6).margin(1e-7));

    std::vector<float> x = g;
    cpu.scale_forward(x.data(), 0.125f, n);
    gpu->scale_forward(dg.data(), 0.125f, n);
    const auto got = download(dg);
    for (size_t i = 0; i < n; ++i) CHECK(got[i] == x[i]);  // one multiply: exact
    for (size_t i = n; i < got.size(); ++i) CHECK(got[i] == 123.25f);
  }
}

TEST_CASE("CUDA DeviceMemory zeroes, copies and round-trips through the host", "[cuda][memory]") {
  if (!gpu_or_skip()) return;
  auto mem = cuda::make_device_memory();
  const auto h = random_floats(1001, 21);
  device::DeviceArray<float> a(*mem, h.size()), b(*mem, h.size());
  a.upload(h);
  mem->copy(b.data(), a.data(), h.size() * sizeof(float));
  CHECK(download(b) == h);
  b.zero();
  CHECK(download(b) == std::vector<float>(h.size(), 0.0f));
  mem->synchronize();
}

TEST_CASE("CUDA DeviceMemory side queue: order() makes each queue wait for the other's earlier work",
          "[cuda][memory]") {
  if (!gpu_or_skip()) return;
  cudaStream_t compute = nullptr;
  REQUIRE(cudaStreamCreate(&compute) == cudaSuccess);
  {
    auto mem = cuda::make_device_memory(compute);
    void* side = mem->side_stream();
    REQUIRE(side != nullptr);
    CHECK(mem->side_stream() == side);  // made once
    CHECK(side != mem->stream());
    // A large upload on the compute queue, then a copy of it on the side queue after order():
    // without the ordering the copy could read the buffer before the upload lands.
    const auto h = random_floats(size_t{20} << 20, 33);  // 80 MiB: a direct, slow upload
    device::DeviceArray<float> a(*mem, h.size()), b(*mem, h.size()), c(*mem, h.size());
    for (int round = 0; round < 3; ++round) {
      a.upload(h);
      mem->order(mem->stream(), side);
      mem->copy_on(side, b.data(), a.data(), h.size() * sizeof(float));
      mem->zero_on(side, a.data(), h.size() * sizeof(float));
      mem->order(side, mem->stream());
      mem->copy(c.data(), b.data(), h.size() * sizeof(float));  // after the side queue's copy
      CHECK(download(c) == h);
      CHECK(download(a) == std::vector<float>(h.size(), 0.0f));
    }
  }
  cudaStreamDestroy(compute);
}

TEST_CASE("CUDA DeviceMemory fences: queued copies through pinned memory, a queue held by another's fence",
          "[cuda][memory]") {
  if (!gpu_or_skip()) return;
  cudaStream_t compute = nullptr;
  REQUIRE(cudaStreamCreate(&compute) == cudaSuccess);
  {
    auto mem = cuda::make_device_memory(compute);
    const auto h = random_floats(size_t{20} << 20, 41);  // 80 MiB: copies that take a while
    const size_t bytes = h.size() * sizeof(float);
    device::DeviceArray<float> a(*mem, h.size()), b(*mem, h.size());
    auto* pinned = static_cast<float*>(mem->allocate_pinned(bytes));
    for (int round = 0; round < 2; ++round) {
      // Download queued after the upload, then a fence: once it passed the host has the bytes.
      a.upload(h);
      std::fill(pinned, pinned + h.size(), -1.0f);
      mem->download_queued(pinned, a.data(), bytes);
      std::shared_ptr<device::QueueFence> f = mem->fence();
      REQUIRE(f != nullptr);
      f->wait();
      CHECK(f->done());
      CHECK(std::equal(h.begin(), h.end(), pinned));
      // Upload queued from pinned memory on the side queue; the compute queue is held by its
      // fence, so a copy queued there afterwards reads the uploaded bytes.
      void* side = mem->side_stream();
      b.zero();
      mem->order(mem->stream(), side);  // after the zero
      mem->zero_on(side, a.data(), bytes);
      REQUIRE(cudaMemcpyAsync(a.data(), pinned, bytes, cudaMemcpyHostToDevice, static_cast<cudaStream_t>(side)) ==
              cudaSuccess);
      mem->fence_on(side)->hold(mem->stream());
      mem->copy(b.data(), a.data(), bytes);
      CHECK(download(b) == h);
      // upload_queued on the compute queue, then the host rewrites pinned memory only after a fence.
      mem->upload_queued(b.data(), pinned, bytes);
      mem->fence()->wait();
      std::fill(pinned, pinned + h.size(), 0.0f);
      CHECK(download(b) == h);
    }
    // Timed fences measure the device's time between them (an 80 MiB copy: well above 0).
    std::shared_ptr<device::QueueFence> t0 = mem->timed_fence_on(mem->stream());
    mem->copy(a.data(), b.data(), bytes);
    std::shared_ptr<device::QueueFence> t1 = mem->timed_fence_on(mem->stream());
    t1->wait();
    const double ms = t1->ms_since(*t0);
    CHECK(ms > 0);
    CHECK(ms < 1000);
    // A thread that binds the backend's device may wait for its fences and queue its copies.
    std::thread other([&] {
      mem->bind_thread();
      mem->copy(a.data(), b.data(), bytes);
      mem->fence()->wait();
    });
    other.join();
    CHECK(download(a) == h);
    mem->release_pinned(pinned);
  }
  cudaStreamDestroy(compute);
}

TEST_CASE("CUDA DeviceMemory uploads: staged batches may be overwritten at once, large ones copy directly",
          "[cuda][memory]") {
  if (!gpu_or_skip()) return;
  auto mem = cuda::make_device_memory();
  // Five uploads from one host buffer rewritten between them (the staging buffers alternate
  // and grow), each to its own device array: every array holds what the buffer held then.
  std::vector<device::DeviceArray<float>> arrays;
  std::vector<std::vector<float>> want;
  std::vector<float> host;
  for (int i = 0; i < 5; ++i) {
    host = random_floats(1000 + 700 * i, 100 + i);
    arrays.emplace_back(*mem, host.size());
    arrays.back().upload(host);
    want.push_back(host);
    std::fill(host.begin(), host.end(), -1.0f);  // the caller reuses its buffer immediately
  }
  for (int i = 0; i < 5; ++i) CHECK(download(arrays[i]) == want[i]);
  // Above the staging limit (64 MiB): 17 Mi floats.
  const auto big = random_floats(size_t{17} << 20, 7);
  device::DeviceArray<float> large(*mem, big.size());
  large.upload(big);
  CHECK(download(large) == big);
}
