#include "codec/sparse.h"

#include "common/error.h"

namespace ds {

void codebook_lookup(const uint32_t* index, uint64_t count, const float* codebook,
                     uint64_t codebook_count, float* out) {
  for (uint64_t i = 0; i < count; ++i) {
    if (index[i] >= codebook_count)
      fail(DS_ERR_FORMAT, "cluster index ", index[i], " of entry ", i,
           " is not below the codebook's count ", codebook_count);
    out[i] = codebook[index[i]];
  }
}

void sparse_rel_expand(const uint32_t* rel, const float* values, uint64_t entry_count, float* out,
                       uint64_t element_count) {
  uint64_t next = 0;  // p + 1: the position the next entry would take with rel = 0
  for (uint64_t i = 0; i < entry_count; ++i) {
    const uint64_t p = next + rel[i];  // rel < 2^16, next <= element_count: no overflow
    if (p >= element_count)
      fail(DS_ERR_FORMAT, "sparse entry ", i, " lands at position ", p,
           ", past the element count ", element_count);
    out[p] = values[i];
    next = p + 1;
  }
}

}  // namespace ds
