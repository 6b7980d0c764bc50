// Weight packing shared by the vpdpbusd GEMMs (AVX-VNNI, AVX-512 VNNI): rows in panels of MR,
// each depth group of KR int8 weights of a row together, [m/MR][k/KR][MR][KR], zero past m and k
// (a GEMM broadcasts one row's group as one int32).
#pragma once

#include <cstdint>

namespace ds {

template <int MR, int KR>
int64_t qs8_packed_w_bytes(int64_t m, int64_t k) {
  return (m + MR - 1) / MR * MR * ((k + KR - 1) / KR) * KR;
}

template <int MR, int KR>
void qs8_pack_w(int64_t m, int64_t k, const int8_t* w, void* dst) {
  int8_t* d = static_cast<int8_t*>(dst);
  const int64_t groups = (k + KR - 1) / KR;
  for (int64_t p = 0; p < (m + MR - 1) / MR; ++p)
    for (int64_t g = 0; g < groups; ++g)
      for (int64_t r = 0; r < MR; ++r)
        for (int64_t j = 0; j < KR; ++j) {
          const int64_t row = p * MR + r, kk = g * KR + j;
          *d++ = row < m && kk < k ? w[row * k + kk] : 0;
        }
}

}  // namespace ds
