// Float storage, 64-byte aligned, for what a session keeps and streams through on every run: the
// weights packed at session creation, the activation arena, the workspace. From 2 MB on it starts
// on a 2 MB boundary and its whole 2 MB pages are advised to be huge pages (Linux transparent huge
// pages; the tail stays in small pages, so no memory is added): in 4 KB pages a stream misses the
// TLB every 1K floats (ResNet-18 stage 3 weights, 9.4 MB per layer, in-model 1.46 -> 1.30 ms;
// MobileNet V2's 5.1 MB classifier).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace ds {

class HugePageBuffer {
 public:
  // `floats` floats (contents unspecified), replacing what the buffer held.
  float* allocate(int64_t floats) {
    huge_.reset();
    small_.clear();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    constexpr size_t kHuge = size_t(2) << 20;
    const size_t bytes = size_t(floats) * sizeof(float);
    void* p = nullptr;
    if (bytes >= kHuge && posix_memalign(&p, kHuge, bytes) == 0) {
      madvise(p, bytes / kHuge * kHuge, MADV_HUGEPAGE);  // advice only: small pages if it fails
      huge_.reset(p);
      return static_cast<float*>(p);
    }
#endif
    small_.resize(size_t(floats + 16));
    float* base = small_.data();
    return base + (16 - (reinterpret_cast<uintptr_t>(base) / sizeof(float)) % 16) % 16;
  }

 private:
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  std::vector<float> small_;
  std::unique_ptr<void, Free> huge_;
};

}  // namespace ds
