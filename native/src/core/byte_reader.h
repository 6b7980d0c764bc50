// Bounds-checked little-endian reader over one section of a .dsm file. Every read names its field;
// a read past the section's end throws DS_ERR_FORMAT with the section, context, field and offsets.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "common/error.h"

namespace ds {

class ByteReader {
 public:
  // `base` is the section's offset in the file, used only in messages.
  ByteReader(const uint8_t* data, uint64_t size, const char* section, uint64_t base)
      : data_(data), size_(size), section_(section), base_(base) {}

  // Set by the loader while it reads one record, e.g. "node 3 ('conv1')".
  void set_context(std::string context) { context_ = std::move(context); }
  const std::string& context() const { return context_; }

  uint8_t u8(const char* field) { return take<uint8_t>(field); }
  uint16_t u16(const char* field) { return take<uint16_t>(field); }
  uint32_t u32(const char* field) { return take<uint32_t>(field); }
  uint64_t u64(const char* field) { return take<uint64_t>(field); }
  int32_t i32(const char* field) { return take<int32_t>(field); }
  int64_t i64(const char* field) { return take<int64_t>(field); }
  float f32(const char* field) { return take<float>(field); }

  // u16 length (<= 4096) + UTF-8 bytes.
  std::string str(const char* field) {
    const uint16_t n = u16(field);
    if (n > 4096) error(field, cat("string length ", n, " is over the limit of 4096"));
    need(n, field);
    std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }

  // Checks that `count` records of at least `min_bytes` each can still fit, before allocating.
  void check_fits(uint64_t count, uint64_t min_bytes, const char* field) {
    if (min_bytes != 0 && count > remaining() / min_bytes)
      error(field, cat("count ", count, " cannot fit in the ", remaining(), " bytes left"));
  }

  uint64_t position() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  [[noreturn]] void error(const char* field, const std::string& what) const {
    fail(DS_ERR_FORMAT, section_, context_.empty() ? "" : ": ", context_, ": ", field, ": ", what);
  }

 private:
  void need(uint64_t n, const char* field) {
    if (n > size_ - pos_)
      error(field, cat(n, " bytes at file offset ", base_ + pos_, " run past the end of the section (at ",
                       base_ + size_, ")"));
  }
  template <typename T>
  T take(const char* field) {
    need(sizeof(T), field);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));  // the format is little-endian, as are our targets
    pos_ += sizeof(T);
    return v;
  }

  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
  const char* section_;
  uint64_t base_;
  std::string context_;
};

}  // namespace ds
