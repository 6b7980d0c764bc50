#include "core/thread_pool.h"

#include <chrono>
#include <cstdlib>

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
#include <immintrin.h>
#define DS_CPU_RELAX() _mm_pause()
#else
#define DS_CPU_RELAX() std::this_thread::yield()
#endif

#include "common/error.h"

namespace ds {
namespace {

int spin_us_from_env(int fallback) {
  const char* s = std::getenv("DS_POOL_SPIN_US");
  if (!s || !*s) return fallback;
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  return (*end == '\0' && v >= 0 && v <= 1000000) ? int(v) : fallback;
}

using Clock = std::chrono::steady_clock;

}  // namespace

ThreadPool::ThreadPool(int threads, int spin_us) : threads_(threads) {
  if (threads < 1) fail(DS_ERR_INVALID_ARG, "threads is ", threads, ", must be >= 1");
  spin_us_ = spin_us >= 0 ? spin_us : spin_us_from_env(kDefaultSpinUs);
  const char* y = std::getenv("DS_POOL_YIELD");
  yield_ = !(y && *y == '0');
  const char* o = std::getenv("DS_POOL_OWNER_FIRST");
  owner_first_ = !(o && *o == '0');
  ranges_.reset(new Range[size_t(threads)]);
  workers_.reserve(size_t(threads - 1));
  for (int t = 1; t < threads; ++t) workers_.emplace_back([this, t] { worker(t); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
  }
  start_cv_.notify_all();
  for (std::thread& w : workers_) w.join();
}

void ThreadPool::work(int thread) {
  int64_t done = 0;
  if (owner_first_) {
    for (int k = 0; k < threads_; ++k) {
      Range& r = ranges_[size_t((thread + k) % threads_)];
      for (;;) {
        const int64_t task = r.next.fetch_add(1, std::memory_order_relaxed);
        if (task >= r.end) break;
        fn_(ctx_, task, thread);
        ++done;
      }
    }
  } else {
    for (;;) {
      const int64_t task = next_.fetch_add(1, std::memory_order_relaxed);
      if (task >= count_) break;
      fn_(ctx_, task, thread);
      ++done;
    }
  }
  if (done) done_.fetch_add(done, std::memory_order_release);
}

uint64_t ThreadPool::wait_for_job(uint64_t seen) {
  // Spin, reading the clock every 64 pauses. Each round also yields: on a machine with more
  // runnable threads than cores, a spinning worker would otherwise take the core from the thread
  // it waits for (the caller, which hands out the next job).
  if (spin_us_ > 0) {
    const Clock::time_point deadline = Clock::now() + std::chrono::microseconds(spin_us_);
    for (;;) {
      for (int i = 0; i < 64; ++i) {
        const uint64_t g = generation_.load(std::memory_order_acquire);
        if (g != seen) return g;
        if (stop_.load(std::memory_order_relaxed)) return seen;
        DS_CPU_RELAX();
      }
      if (Clock::now() >= deadline) break;
      if (yield_) std::this_thread::yield();
    }
  }
  // Sleep. run() bumps generation_ and then reads sleeping_, we bump sleeping_ and then read
  // generation_ (both seq_cst), so either it sees us asleep and notifies under mu_, or we see the
  // new generation here and never wait.
  std::unique_lock<std::mutex> lock(mu_);
  sleeping_.fetch_add(1);
  start_cv_.wait(lock, [&] { return stop_.load() || generation_.load() != seen; });
  sleeping_.fetch_sub(1);
  return stop_.load() ? seen : generation_.load(std::memory_order_acquire);
}

void ThreadPool::worker(int thread) {
  uint64_t seen = 0;
  for (;;) {
    const uint64_t g = wait_for_job(seen);
    if (g == seen) return;  // stopping
    seen = g;
    // Enter the job unless run() has closed it already (its caller ran every task itself): then
    // the job fields may belong to the next job, and must not be read.
    inside_.fetch_add(1);
    if (closed_.load() != g && generation_.load() == g) work(thread);
    inside_.fetch_sub(1, std::memory_order_release);
  }
}

void ThreadPool::run(int64_t count, TaskFn fn, void* ctx) {
  if (count <= 0) return;
  if (threads_ == 1 || count == 1) {
    for (int64_t t = 0; t < count; ++t) fn(ctx, t, 0);
    return;
  }
  // No worker is inside an open job here (the last run closed its job and waited for inside_ to
  // drain), so the fields are ours.
  fn_ = fn;
  ctx_ = ctx;
  count_ = count;
  next_.store(0, std::memory_order_relaxed);
  for (int t = 0; t < threads_; ++t) {
    ranges_[size_t(t)].next.store(t * count / threads_, std::memory_order_relaxed);
    ranges_[size_t(t)].end = (t + 1) * count / threads_;
  }
  done_.store(0, std::memory_order_relaxed);
  const uint64_t g = generation_.fetch_add(1) + 1;  // seq_cst: publishes the fields, ordered before the sleeping_ read
  if (sleeping_.load() > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    start_cv_.notify_all();
  }
  work(0);
  // Wait for the tasks workers took, not for every worker: one that is slow to wake (asleep, or
  // descheduled on a busy machine) finds every task taken and the job closed. Spin, then yield so
  // a worker that shares our core can run.
  for (int spins = 0; done_.load(std::memory_order_acquire) != count; ++spins) {
    if (spins < 4096) DS_CPU_RELAX();
    else std::this_thread::yield();
  }
  // Close the job, then wait for workers that entered it before the close to leave. closed_ is
  // stored before inside_ is read and a worker bumps inside_ before it reads closed_ (seq_cst
  // both), so a worker either is counted here or sees the job closed.
  closed_.store(g);
  for (int spins = 0; inside_.load(std::memory_order_acquire) != 0; ++spins) {
    if (spins < 4096) DS_CPU_RELAX();
    else std::this_thread::yield();
  }
}

}  // namespace ds
