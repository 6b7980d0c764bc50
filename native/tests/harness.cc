// Runs every registered test; exit 0 when all pass, 77 (ctest SKIP_RETURN_CODE) when every test
// skipped, 1 on any failure. An optional argument runs only tests whose name contains it.
#include "harness.h"

#include <chrono>
#include <cstring>
#include <exception>

namespace harness {

std::vector<TestCase>& registry() {
  static std::vector<TestCase> tests;
  return tests;
}

bool register_test(const char* name, void (*fn)()) {
  registry().push_back({name, fn});
  return true;
}

static int g_failures = 0;

void record_failure(const char* file, int line, const std::string& what) {
  ++g_failures;
  std::fprintf(stderr, "  %s:%d: CHECK failed: %s\n", file, line, what.c_str());
}

}  // namespace harness

int main(int argc, char** argv) {
  int failed = 0, passed = 0, skipped = 0;
  const auto start = std::chrono::steady_clock::now();
  for (const auto& t : harness::registry()) {
    if (argc > 1 && !std::strstr(t.name, argv[1])) continue;
    const int before = harness::g_failures;
    try {
      t.fn();
    } catch (const harness::Skip& s) {
      std::printf("[SKIP] %s: %s\n", t.name, s.reason.c_str());
      ++skipped;
      continue;
    } catch (const std::exception& e) {
      harness::record_failure(__FILE__, __LINE__, std::string("exception: ") + e.what());
    }
    const bool ok = harness::g_failures == before;
    std::printf("[%s] %s\n", ok ? " OK " : "FAIL", t.name);
    (ok ? passed : failed)++;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%d passed, %d failed, %d skipped (%.2f s)\n", passed, failed, skipped, secs);
  if (failed) return 1;
  return passed == 0 && skipped > 0 ? 77 : 0;
}
