// A persistent pool: created once (per session) with N threads, of which the calling thread is
// one. parallel_for hands out task indices [0, count) owner first: thread t runs its own range
// [t * count / N, (t + 1) * count / N) in order, then takes tasks left in the others' ranges.
// So when the workers are on time a thread gets the same part of a job's data as in the last
// job of that size (a layer's weight panels stay in its L2), and a late worker's share is still
// taken by the others. DS_POOL_OWNER_FIRST=0 hands out from one shared counter instead
// (measurement). With N == 1 (or one task) it runs inline, in order, on the caller. Tasks must
// not throw. One job at a time: parallel_for is not reentrant.
//
// Waiting is spin-then-sleep: a model runs dozens of short jobs back to back, and waking a thread
// from a condition variable costs 10-30 us each time. So after a job each worker spins on the job
// generation for spin_us microseconds before it sleeps on the condition variable, and the caller
// spins for the tasks workers took to finish: when a worker is slow to wake (asleep, or
// descheduled on a busy machine) the caller runs the remaining tasks itself and the late worker
// finds the job closed. An idle pool therefore burns its workers' cores for at most
// spin_us after its last job.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace ds {

class ThreadPool {
 public:
  static constexpr int kDefaultSpinUs = 100;

  // threads >= 1; spin_us >= 0 (0: workers sleep right after each job). DS_POOL_SPIN_US, when
  // set, overrides the default; DS_POOL_YIELD=0 drops the yields from the spin (measurement).
  explicit ThreadPool(int threads, int spin_us = -1);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return threads_; }
  int spin_us() const { return spin_us_; }
  // Workers blocked on the condition variable right now (for tests of the idle state).
  int sleeping() const { return sleeping_.load(std::memory_order_relaxed); }

  // Calls fn(task, thread) for every task in [0, count); thread in [0, size()) identifies the
  // executing thread (0 = caller), e.g. to pick its slice of a workspace. Returns when all are done.
  template <typename Fn>
  void parallel_for(int64_t count, Fn&& fn) {
    using F = std::remove_reference_t<Fn>;  // an lvalue callable deduces Fn as a reference
    run(count, [](void* ctx, int64_t task, int thread) { (*static_cast<F*>(ctx))(task, thread); },
        const_cast<void*>(static_cast<const void*>(&fn)));
  }

  using TaskFn = void (*)(void* ctx, int64_t task, int thread);
  void run(int64_t count, TaskFn fn, void* ctx);

 private:
  void worker(int thread);
  void work(int thread);
  // Returns the next generation after `seen`, or seen when stopping.
  uint64_t wait_for_job(uint64_t seen);

  int threads_;
  int spin_us_;
  bool yield_ = true;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_cv_;
  // Bumped once per job after the job fields are written (release); workers read them after
  // seeing the new value (acquire).
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stop_{false};
  std::atomic<int> sleeping_{0};  // workers inside start_cv_.wait (changed under mu_)
  TaskFn fn_ = nullptr;
  void* ctx_ = nullptr;
  int64_t count_ = 0;
  alignas(64) std::atomic<int64_t> next_{0};  // the next task to hand out (shared hand-out)
  // Owner-first hand-out: thread t runs tasks [t * count / N, (t + 1) * count / N) in order,
  // then takes what is left of the others' ranges (see run).
  struct alignas(64) Range {
    std::atomic<int64_t> next{0};
    int64_t end = 0;
  };
  std::unique_ptr<Range[]> ranges_;
  bool owner_first_ = true;
  alignas(64) std::atomic<int64_t> done_{0};  // tasks finished in the current job
  std::atomic<uint64_t> closed_{0};           // the last generation whose tasks are all done
  std::atomic<int> inside_{0};                // workers between entering a job and leaving it
};

}  // namespace ds
