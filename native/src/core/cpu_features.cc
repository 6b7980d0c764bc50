#include "core/cpu_features.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <cstdint>
#define DS_X86 1
#endif

namespace ds {

#if defined(DS_X86)
namespace {

bool cpuid(unsigned leaf, unsigned subleaf, unsigned r[4]) {
  if (__get_cpuid_max(0, nullptr) < leaf) return false;
  __cpuid_count(leaf, subleaf, r[0], r[1], r[2], r[3]);
  return true;
}

uint64_t xgetbv0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t(hi) << 32) | lo;
}

bool bit(unsigned v, int b) { return (v >> b) & 1u; }

}  // namespace

CpuFeatures detect_cpu_features() {
  CpuFeatures f;
  unsigned l1[4] = {0, 0, 0, 0}, l7[4] = {0, 0, 0, 0}, l71[4] = {0, 0, 0, 0};
  if (!cpuid(1, 0, l1)) return f;
  const bool osxsave = bit(l1[2], 27), avx = bit(l1[2], 28);
  if (!osxsave || !avx) return f;  // xgetbv is only defined with OSXSAVE
  const uint64_t xcr0 = xgetbv0();
  f.os_ymm = (xcr0 & 0x6) == 0x6;            // SSE | AVX
  f.os_zmm = f.os_ymm && (xcr0 & 0xE0) == 0xE0;  // opmask | ZMM_Hi256 | Hi16_ZMM
  if (!f.os_ymm) return f;
  cpuid(7, 0, l7);
  if (l7[0] >= 1) cpuid(7, 1, l71);
  f.fma = bit(l1[2], 12);
  f.avx2 = bit(l7[1], 5);
  f.avxvnni = bit(l71[0], 4);
  if (f.os_zmm) {
    f.avx512f = bit(l7[1], 16);
    f.avx512dq = bit(l7[1], 17);
    f.avx512bw = bit(l7[1], 30);
    f.avx512vl = bit(l7[1], 31);
    f.avx512vnni = f.avx512f && bit(l7[2], 11);
  }
  return f;
}

#else

CpuFeatures detect_cpu_features() { return CpuFeatures{}; }

#endif

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect_cpu_features();
  return f;
}

}  // namespace ds
