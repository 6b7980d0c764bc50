// x86 CPU feature detection: cpuid for what the processor implements, xgetbv for what the operating
// system saves on a context switch (YMM and ZMM state). A flag is true only when both agree, so a
// kernel chosen from these flags can run. On other architectures every flag is false.
#pragma once

namespace ds {

struct CpuFeatures {
  bool fma = false;
  bool avx2 = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512dq = false;
  bool avx512vl = false;
  bool avx512vnni = false;  // VPDPBUSD on ZMM (AVX512_VNNI)
  bool avxvnni = false;     // VPDPBUSD on YMM with the VEX encoding (AVX_VNNI)
  bool os_ymm = false;      // XCR0 has SSE and AVX state
  bool os_zmm = false;      // XCR0 also has opmask, ZMM_Hi256 and Hi16_ZMM state
};

// Runs cpuid/xgetbv on each call; cpu_features() caches the first answer.
CpuFeatures detect_cpu_features();
const CpuFeatures& cpu_features();

}  // namespace ds
