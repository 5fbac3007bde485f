#include "model/cpu/host_memory.hpp"

#include <cstdlib>
#include <cstring>
#include <new>

namespace holmes::model::cpu {

namespace {

class HostMemory final : public device::DeviceMemory {
 public:
  const char* name() const override { return "host"; }
  void* allocate(size_t bytes) override {
    constexpr size_t kAlign = 64;
    void* p = std::aligned_alloc(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
    if (p == nullptr) throw std::bad_alloc();
    return p;
  }
  void release(void* p) noexcept override { std::free(p); }
  void zero(void* p, size_t bytes) override { std::memset(p, 0, bytes); }
  void copy(void* dst, const void* src, size_t bytes) override { std::memmove(dst, src, bytes); }
  void upload(void* dst, const void* host, size_t bytes) override { std::memmove(dst, host, bytes); }
  void download(void* host, const void* src, size_t bytes) override { std::memmove(host, src, bytes); }
  void synchronize() override {}
  bool is_host() const override { return true; }
};

}  // namespace

std::unique_ptr<device::DeviceMemory> make_host_memory() { return std::make_unique<HostMemory>(); }

}  // namespace holmes::model::cpu
