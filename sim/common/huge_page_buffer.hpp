#pragma once
// A zeroed array of 64-bit words backed by transparent huge pages where the kernel allows it. The
// expert-record pools are read at random once per token per step; with 4 KiB pages nearly every read
// also misses the TLB, which doubles the cost of the decode hot loop.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace eldr {

class HugePageBuffer {
 public:
  HugePageBuffer() = default;
  explicit HugePageBuffer(size_t words);
  uint64_t* data() { return data_.get(); }
  const uint64_t* data() const { return data_.get(); }
  size_t size() const { return words_; }
  uint64_t& operator[](size_t i) { return data_[i]; }
  const uint64_t& operator[](size_t i) const { return data_[i]; }

 private:
  struct Free {
    void operator()(uint64_t* p) const;
  };
  std::unique_ptr<uint64_t[], Free> data_;
  size_t words_ = 0;
};

}  // namespace eldr
