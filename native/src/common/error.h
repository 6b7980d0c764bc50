// Internal error type. Everything below the C API reports failures by throwing ds::Error; the C API
// catches it (and everything else) and turns it into a status plus a thread-local message.
#pragma once

#include <exception>
#include <sstream>
#include <string>
#include <utility>

#include "deepslim/deepslim.h"

namespace ds {

class Error : public std::exception {
 public:
  Error(ds_status status, std::string message) : status_(status), message_(std::move(message)) {}
  ds_status status() const { return status_; }
  const std::string& message() const { return message_; }
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  ds_status status_;
  std::string message_;
};

// Concatenates anything streamable into a string: cat("node '", name, "': ", n).
template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream s;
  (s << ... << args);
  return s.str();
}

template <typename... Args>
[[noreturn]] void fail(ds_status status, const Args&... args) {
  throw Error(status, cat(args...));
}

}  // namespace ds
