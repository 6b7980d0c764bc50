// A persistent pool: created once (per session) with N threads, of which the calling thread is
// one, so N - 1 workers wait on a condition variable between jobs. parallel_for hands out task
// indices [0, count) dynamically; with N == 1 (or one task) it runs inline, in order, on the
// caller. Tasks must not throw. One job at a time: parallel_for is not reentrant.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace ds {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);  // threads >= 1
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return threads_; }

  // Calls fn(task, thread) for every task in [0, count); thread in [0, size()) identifies the
  // executing thread (0 = caller), e.g. to pick its slice of a workspace. Returns when all are done.
  template <typename Fn>
  void parallel_for(int64_t count, Fn&& fn) {
    run(count, [](void* ctx, int64_t task, int thread) { (*static_cast<Fn*>(ctx))(task, thread); }, &fn);
  }

  using TaskFn = void (*)(void* ctx, int64_t task, int thread);
  void run(int64_t count, TaskFn fn, void* ctx);

 private:
  void worker(int thread);
  void work(int thread);

  int threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  uint64_t generation_ = 0;  // guarded by mu_; bumped once per job
  bool stop_ = false;
  TaskFn fn_ = nullptr;
  void* ctx_ = nullptr;
  int64_t count_ = 0;
  std::atomic<int64_t> next_{0};
  std::atomic<int> active_{0};  // workers still in the current job
};

}  // namespace ds
