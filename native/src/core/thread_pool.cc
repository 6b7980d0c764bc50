#include "core/thread_pool.h"

#include "common/error.h"

namespace ds {

ThreadPool::ThreadPool(int threads) : threads_(threads) {
  if (threads < 1) fail(DS_ERR_INVALID_ARG, "threads is ", threads, ", must be >= 1");
  workers_.reserve(size_t(threads - 1));
  for (int t = 1; t < threads; ++t) workers_.emplace_back([this, t] { worker(t); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (std::thread& w : workers_) w.join();
}

void ThreadPool::work(int thread) {
  for (;;) {
    const int64_t task = next_.fetch_add(1, std::memory_order_relaxed);
    if (task >= count_) return;
    fn_(ctx_, task, thread);
  }
}

void ThreadPool::worker(int thread) {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    work(thread);
    if (active_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mu_);
      done_cv_.notify_one();
    }
  }
}

void ThreadPool::run(int64_t count, TaskFn fn, void* ctx) {
  if (count <= 0) return;
  if (threads_ == 1 || count == 1) {
    for (int64_t t = 0; t < count; ++t) fn(ctx, t, 0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = fn;
    ctx_ = ctx;
    count_ = count;
    next_.store(0, std::memory_order_relaxed);
    active_.store(threads_ - 1, std::memory_order_relaxed);
    ++generation_;
  }
  start_cv_.notify_all();
  work(0);
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return active_.load(std::memory_order_acquire) == 0; });
}

}  // namespace ds
