// Codebook lookup and sparse_rel expansion (docs/format.md, "Decoding").
#pragma once

#include <cstdint>

namespace ds {

// out[i] = codebook[index[i]]; throws DS_ERR_FORMAT naming the entry for index >= codebook_count.
void codebook_lookup(const uint32_t* index, uint64_t count, const float* codebook,
                     uint64_t codebook_count, float* out);

// Deep Compression relative indexing: p starts at -1; for each entry, p += 1 + rel[i] and
// out[p] = values[i]. `out` (element_count floats) must be zeroed by the caller. Throws
// DS_ERR_FORMAT naming the entry when p would reach element_count.
void sparse_rel_expand(const uint32_t* rel, const float* values, uint64_t entry_count, float* out,
                       uint64_t element_count);

}  // namespace ds
