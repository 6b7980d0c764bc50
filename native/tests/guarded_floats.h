// Test buffers next to an inaccessible page (Linux), so that a kernel's access just past the end
// (Guard::kAfter) or just before the start (Guard::kBefore) of its operand faults instead of
// reading or overwriting a neighbour unnoticed; elsewhere a plain allocation.
#pragma once

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#if defined(__linux__)
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace guarded {

enum class Guard { kAfter, kBefore };

class Floats {
 public:
  explicit Floats(size_t floats, Guard side = Guard::kAfter) : n_(floats) {
#if defined(__linux__)
    const size_t page = size_t(sysconf(_SC_PAGESIZE)), bytes = (floats * sizeof(float) + page - 1) / page * page;
    len_ = bytes + page;
    void* m = mmap(nullptr, len_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m != MAP_FAILED) {
      base_ = static_cast<char*>(m);
      if (side == Guard::kAfter) {  // the data end where the guard page starts
        mprotect(base_ + bytes, page, PROT_NONE);
        data_ = reinterpret_cast<float*>(base_ + bytes) - floats;
      } else {  // the data start where the guard page ends
        mprotect(base_, page, PROT_NONE);
        data_ = reinterpret_cast<float*>(base_ + page);
      }
      return;
    }
#endif
    (void)side;
    own_.resize(floats);
    data_ = own_.data();
  }
  // A copy of v's elements.
  Floats(const std::vector<float>& v, Guard side) : Floats(v.size(), side) {
    for (size_t i = 0; i < v.size(); ++i) data_[i] = v[i];
  }
  Floats(const Floats&) = delete;
  Floats& operator=(const Floats&) = delete;
  ~Floats() {
#if defined(__linux__)
    if (base_) munmap(base_, len_);
#endif
  }
  float* data() { return data_; }
  const float* data() const { return data_; }
  size_t size() const { return n_; }
  std::vector<float> vector() const { return std::vector<float>(data_, data_ + n_); }

 private:
  size_t n_, len_ = 0;
  char* base_ = nullptr;
  float* data_ = nullptr;
  std::vector<float> own_;
};

#if defined(__linux__)
namespace detail {
inline char* case_text() {
  static char text[512];
  return text;
}
inline struct sigaction* previous_action() {
  static struct sigaction old;
  return &old;
}
inline void on_fault(int) {
  const char head[] = "\nfault (a guard page?) during: ";
  ssize_t ignored = write(2, head, sizeof head - 1);
  ignored = write(2, case_text(), strlen(case_text()));
  ignored = write(2, "\n", 1);
  (void)ignored;
  sigaction(SIGSEGV, previous_action(), nullptr);  // the access faults again, into the previous handler
}
}  // namespace detail
#endif

// Names the case a fault reports: the first call installs a SIGSEGV handler that prints the name
// before the previous handler (the default, or a sanitizer's) runs.
inline void set_case(const std::string& what) {
#if defined(__linux__)
  static const bool installed = [] {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_handler = detail::on_fault;
    sigemptyset(&sa.sa_mask);
    return sigaction(SIGSEGV, &sa, detail::previous_action()) == 0;
  }();
  (void)installed;
  std::snprintf(detail::case_text(), 512, "%s", what.c_str());
#else
  (void)what;
#endif
}

}  // namespace guarded
