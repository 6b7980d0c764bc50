// The persistent thread pool: every task runs exactly once, thread ids stay in range, one thread
// runs inline in order, many back-to-back jobs neither deadlock nor lose tasks.
#include <atomic>
#include <thread>
#include <vector>

#include "common/error.h"
#include "core/thread_pool.h"
#include "harness.h"

TEST(each_task_runs_once) {
  for (int threads : {1, 2, 4}) {
    ds::ThreadPool pool(threads);
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

TEST(many_jobs_back_to_back) {
  ds::ThreadPool pool(3);
  std::atomic<int64_t> sum{0};
  for (int job = 0; job < 2000; ++job)
    pool.parallel_for(4, [&](int64_t task, int) { sum.fetch_add(task + 1); });
  CHECK(sum.load() == 2000 * 10);
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
