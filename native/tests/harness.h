// A tiny test harness: TEST(name) registers a function, CHECK* record failures and go on,
// REQUIRE* return from the test on failure, SKIP(msg) marks the test skipped.
#pragma once

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace harness {

struct TestCase {
  const char* name;
  void (*fn)();
};

std::vector<TestCase>& registry();
void record_failure(const char* file, int line, const std::string& what);
struct Skip {
  std::string reason;
};
bool register_test(const char* name, void (*fn)());

}  // namespace harness

#define TEST(name)                                                             \
  static void name();                                                          \
  static const bool name##_registered = harness::register_test(#name, name);  \
  static void name()

#define CHECK(cond) \
  do { if (!(cond)) harness::record_failure(__FILE__, __LINE__, #cond); } while (0)
#define CHECK_MSG(cond, msg) \
  do { if (!(cond)) harness::record_failure(__FILE__, __LINE__, std::string(#cond) + ": " + (msg)); } while (0)
#define REQUIRE(cond) \
  do { if (!(cond)) { harness::record_failure(__FILE__, __LINE__, #cond); return; } } while (0)
#define REQUIRE_MSG(cond, msg) \
  do { if (!(cond)) { harness::record_failure(__FILE__, __LINE__, std::string(#cond) + ": " + (msg)); return; } } while (0)
#define CHECK_NEAR(a, b, tol)                                                                      \
  do {                                                                                             \
    const double a_ = (a), b_ = (b);                                                               \
    if (!(std::fabs(a_ - b_) <= (tol)))                                                            \
      harness::record_failure(__FILE__, __LINE__, std::string(#a " ~ " #b ": ") + std::to_string(a_) + \
                                                      " vs " + std::to_string(b_));                 \
  } while (0)
#define SKIP(msg) throw harness::Skip{msg}
