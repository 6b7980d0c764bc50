// Splitting an op's independent work items (planes, elements) over the session's threads.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/thread_pool.h"

namespace ds {

// Pieces per thread: the pool hands them out dynamically, so that when a worker is late (asleep,
// or descheduled on a busy machine) the caller runs most of the range instead of waiting for a
// whole half of it.
constexpr int64_t kPiecesPerThread = 4;

// Calls fn(begin, end) on pieces of [0, n) that cover it: about kPiecesPerThread per thread, each
// a multiple of `align` items long (but the last), or the whole range inline when there is one
// thread or fewer than min_items items (the hand-off then costs more than it saves).
template <typename Fn>
void parallel_range(ThreadPool* pool, int64_t n, int64_t min_items, int64_t align, Fn&& fn) {
  const int threads = pool ? pool->size() : 1;
  if (threads < 2 || n < min_items || n <= align) {
    fn(int64_t{0}, n);
    return;
  }
  const int64_t pieces = std::min((n + align - 1) / align, kPiecesPerThread * threads);
  const int64_t per = ((n + pieces - 1) / pieces + align - 1) / align * align;
  pool->parallel_for((n + per - 1) / per, [&](int64_t t, int) { fn(t * per, std::min(n, (t + 1) * per)); });
}

}  // namespace ds
