// Splitting an op's independent work items (planes, elements) over the session's threads.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/thread_pool.h"

namespace ds {

// Tasks per thread for the splits of compute-bound work (GEMMs, Winograd, conv im2col): the pool
// hands them out owner first, then lets a thread take what is left of the others' ranges, so
// that when a worker is late (asleep, or descheduled on a busy machine) the caller runs most of
// the work instead of waiting for a whole half of it.
constexpr int64_t kPiecesPerThread = 4;

// The threads a job on `pool` runs on (null: inline, 1).
inline int threads_of(const ThreadPool* pool) { return pool ? pool->size() : 1; }

// Items per piece when n items are cut into about kPiecesPerThread pieces per thread (at least 1).
inline int64_t items_per_piece(int64_t n, int threads) {
  return std::max<int64_t>(1, n / (kPiecesPerThread * threads));
}

// Calls fn(begin, end) on pieces of [0, n) that cover it: one per thread, each a multiple of
// `align` items long (but the last), or the whole range inline when there is one thread or fewer
// than min_items items (the hand-off then costs more than it saves). One piece per thread, not
// kPiecesPerThread: for the memory-bound pooling planes 4 per thread measured no gain in-model
// (SqueezeNet 1.1 at 2 threads: maxpool 64x111x111 and the 1x1 conv after it 1.09x and 1.25x
// slower, but an A/A comparison of one library against itself moves those nodes as much).
template <typename Fn>
void parallel_range(ThreadPool* pool, int64_t n, int64_t min_items, int64_t align, Fn&& fn) {
  const int threads = threads_of(pool);
  if (threads < 2 || n < min_items || n <= align) {
    fn(int64_t{0}, n);
    return;
  }
  const int64_t per = ((n + threads - 1) / threads + align - 1) / align * align;
  pool->parallel_for((n + per - 1) / per, [&](int64_t t, int) { fn(t * per, std::min(n, (t + 1) * per)); });
}

}  // namespace ds
