// The persistent thread pool: every task runs exactly once (owner-first hand-out and the shared
// counter), thread ids stay in range, one thread runs inline in order, a worker starts with its
// own range of the tasks, many back-to-back jobs neither deadlock nor lose tasks whether the
// workers spin or sleep between them, and an idle pool's workers end up asleep.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "common/error.h"
#include "core/thread_pool.h"
#include "harness.h"

TEST(each_task_runs_once) {
  for (const char* owner_first : {"1", "0"}) {
    for (int threads : {1, 2, 4}) {
      setenv("DS_POOL_OWNER_FIRST", owner_first, 1);
      ds::ThreadPool pool(threads);
      unsetenv("DS_POOL_OWNER_FIRST");
      CHECK(pool.size() == threads);
      for (int64_t count : {1, 2, 3, 7, 100, 1000}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(count));
        for (auto& h : hits) h = 0;
        std::atomic<int> bad_thread{0};
        pool.parallel_for(count, [&](int64_t task, int thread) {
          hits[size_t(task)].fetch_add(1);
          if (thread < 0 || thread >= threads) bad_thread.fetch_add(1);
        });
        for (int64_t t = 0; t < count; ++t) CHECK(hits[size_t(t)].load() == 1);
        CHECK(bad_thread.load() == 0);
      }
    }
  }
}

TEST(one_thread_runs_inline_in_order) {
  ds::ThreadPool pool(1);
  const std::thread::id caller = std::this_thread::get_id();
  std::vector<int64_t> order;
  bool same_thread = true;
  pool.parallel_for(5, [&](int64_t task, int thread) {
    order.push_back(task);
    same_thread = same_thread && thread == 0 && std::this_thread::get_id() == caller;
  });
  CHECK((order == std::vector<int64_t>{0, 1, 2, 3, 4}));
  CHECK(same_thread);
}

TEST(workers_take_part) {
  // With tasks that wait for each other, two threads must both run one: a pool that ran every
  // task on the caller would never finish the first task (bounded here by a spin limit).
  ds::ThreadPool pool(2);
  std::atomic<int> arrived{0};
  std::atomic<bool> both{true};
  pool.parallel_for(2, [&](int64_t, int) {
    arrived.fetch_add(1);
    int64_t spins = 0;
    while (arrived.load() < 2 && ++spins < 2000000000) std::this_thread::yield();
    if (arrived.load() < 2) both = false;
  });
  CHECK(both.load());
}

TEST(a_worker_starts_with_its_own_range) {
  // Owner-first hand-out: of 4 tasks the caller owns [0, 2) and the worker [2, 4), so that a
  // thread gets the same part of the data job after job. Task 0 (the caller's first) waits until
  // another task has started, which only the worker can do; a shared counter would hand it task
  // 0 or 1.
  setenv("DS_POOL_OWNER_FIRST", "1", 1);
  ds::ThreadPool pool(2);
  unsetenv("DS_POOL_OWNER_FIRST");
  std::atomic<int64_t> worker_first{-1};
  pool.parallel_for(4, [&](int64_t task, int thread) {
    if (thread != 0) {
      int64_t none = -1;
      worker_first.compare_exchange_strong(none, task);
    }
    if (task != 0 || thread != 0) return;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (worker_first.load() < 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
  });
  CHECK(worker_first.load() == 2);
}

TEST(many_jobs_back_to_back) {
  ds::ThreadPool pool(3);
  std::atomic<int64_t> sum{0};
  for (int job = 0; job < 2000; ++job)
    pool.parallel_for(4, [&](int64_t task, int) { sum.fetch_add(task + 1); });
  CHECK(sum.load() == 2000 * 10);
}

TEST(many_jobs_any_spin) {
  // spin 0: every job wakes sleeping workers (the lost-wake-up race); 1 us: a mix of spinning and
  // sleeping; 1000 us: always spinning. Jobs of uneven length shift the timing around.
  for (int spin_us : {0, 1, 1000}) {
    for (int threads : {2, 3}) {
      ds::ThreadPool pool(threads, spin_us);
      CHECK(pool.spin_us() == spin_us);
      std::atomic<int64_t> sum{0};
      int64_t expect = 0;
      for (int job = 0; job < 3000; ++job) {
        const int64_t count = 1 + job % 5;
        pool.parallel_for(count, [&](int64_t task, int) {
          if (task == 0 && job % 7 == 0) std::this_thread::sleep_for(std::chrono::microseconds(job % 3));
          sum.fetch_add(task + 1);
        });
        expect += count * (count + 1) / 2;
        // Sometimes pause between jobs, long enough for short-spinning workers to fall asleep.
        if (job % 97 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      CHECK_MSG(sum.load() == expect, "spin_us " + std::to_string(spin_us) + ", threads " + std::to_string(threads));
    }
  }
}

TEST(idle_workers_sleep) {
  // After a job the workers spin for spin_us, then block: an idle session must not hold a core.
  ds::ThreadPool pool(3, 200);
  std::atomic<int> ran{0};
  pool.parallel_for(8, [&](int64_t, int) { ran.fetch_add(1); });
  CHECK(ran.load() == 8);
  bool asleep = false;
  for (int i = 0; i < 2000 && !asleep; ++i) {  // up to 2 s on a loaded machine
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    asleep = pool.sleeping() == 2;
  }
  CHECK(asleep);
  // And they wake up again for the next job.
  pool.parallel_for(8, [&](int64_t, int) { ran.fetch_add(1); });
  CHECK(ran.load() == 16);
}

TEST(destroy_while_spinning_or_sleeping) {
  for (int spin_us : {0, 100000}) {
    ds::ThreadPool pool(4, spin_us);
    pool.parallel_for(4, [](int64_t, int) {});
  }  // the destructor must return promptly in both states (ctest's timeout catches a hang)
  ds::ThreadPool never_used(2);
}

TEST(zero_threads_is_an_error) {
  bool threw = false;
  try {
    ds::ThreadPool pool(0);
  } catch (const ds::Error& e) {
    threw = e.status() == DS_ERR_INVALID_ARG;
  }
  CHECK(threw);
}
