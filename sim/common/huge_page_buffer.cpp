#include "sim/common/huge_page_buffer.hpp"

#include <cstdlib>
#include <cstring>
#include <new>
#include <sys/mman.h>

namespace eldr {

static constexpr size_t kHugePage = size_t(2) << 20;

HugePageBuffer::HugePageBuffer(size_t words) : words_(words)
{
  size_t bytes = (words * sizeof(uint64_t) + kHugePage - 1) / kHugePage * kHugePage;
  if (bytes == 0)
    return;
  void* p = std::aligned_alloc(kHugePage, bytes);
  if (!p)
    throw std::bad_alloc();
  ::madvise(p, bytes, MADV_HUGEPAGE);  // advisory: without THP the buffer still works, just slower
  std::memset(p, 0, bytes);
  data_.reset(static_cast<uint64_t*>(p));
}

void HugePageBuffer::Free::operator()(uint64_t* p) const
{
  std::free(p);
}

}  // namespace eldr
