#include "base/read_buffer.h"

#include <sys/mman.h>

#include <cstring>
#include <new>

namespace cairn {
namespace {

// From this size up, memory is a huge-page mapping: a chunk buffer (up to
// 4 MiB and a header) or a decompression buffer, alive for a whole run.
constexpr size_t kMapFrom = size_t{1} << 20;
constexpr size_t kHugePage = size_t{2} << 20;

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

constexpr size_t kPage = 4096;

// An anonymous mapping of `size` (a multiple of kPage) aligned to kHugePage,
// advised for transparent huge pages: the whole huge pages it spans are
// huge, the rest small. Kernels before 6.7 do not align large mappings
// themselves, so map one huge page more and trim.
uint8_t* MapHuge(size_t size) {
  void* p = ::mmap(nullptr, size + kHugePage, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  auto start = reinterpret_cast<uintptr_t>(p);
  uintptr_t aligned = RoundUp(start, kHugePage);
  if (aligned > start) ::munmap(p, aligned - start);
  uintptr_t tail = aligned + size;
  uintptr_t end = start + size + kHugePage;
  if (end > tail) ::munmap(reinterpret_cast<void*>(tail), end - tail);
  // Advice only: without THP (or with it off) the pages are small.
  ::madvise(reinterpret_cast<void*>(aligned), size, MADV_HUGEPAGE);
  return reinterpret_cast<uint8_t*>(aligned);
}

}  // namespace

ReadBuffer& ReadBuffer::operator=(ReadBuffer&& other) noexcept {
  if (this == &other) return *this;
  Free();
  data_ = std::exchange(other.data_, nullptr);
  size_ = std::exchange(other.size_, 0);
  capacity_ = std::exchange(other.capacity_, 0);
  mapped_ = std::exchange(other.mapped_, false);
  adopted_ = std::exchange(other.adopted_, false);
  adopted_bytes_ = std::move(other.adopted_bytes_);
  other.adopted_bytes_ = Bytes();
  // A moved vector keeps its heap block, so data_ still points into it.
  return *this;
}

void ReadBuffer::Adopt(Bytes&& bytes) {
  Free();
  adopted_bytes_ = std::move(bytes);
  adopted_ = true;
  data_ = adopted_bytes_.data();
  size_ = adopted_bytes_.size();
}

Bytes ReadBuffer::Release() {
  Bytes out;
  if (adopted_) {
    adopted_bytes_.resize(size_);
    out = std::move(adopted_bytes_);
  } else {
    out.assign(begin(), end());
  }
  Free();
  return out;
}

void ReadBuffer::ResizeSlow(size_t n) {
  if (adopted_ && n <= adopted_bytes_.size()) {
    size_ = n;
    return;
  }
  Grow(n);
  size_ = n;
}

void ReadBuffer::Grow(size_t n) {
  size_t want = n + n / 8;
  uint8_t* fresh;
  bool mapped = want >= kMapFrom;
  if (mapped) {
    // To a small page, not a huge one: a chunk of 4 MiB and its header in a
    // buffer rounded to 6 MiB touched a third huge page (2 MiB zeroed and
    // held for a few bytes), so every cached 4 MiB chunk held 6 MiB.
    want = RoundUp(want, kPage);
    fresh = MapHuge(want);
  } else {
    fresh = new uint8_t[want];  // default-initialised: not zeroed
  }
  if (size_ > 0) std::memcpy(fresh, data_, size_);
  const size_t keep = size_;
  Free();
  data_ = fresh;
  size_ = keep;
  capacity_ = want;
  mapped_ = mapped;
}

void ReadBuffer::Free() {
  if (adopted_) {
    adopted_bytes_ = Bytes();
  } else if (mapped_) {
    ::munmap(data_, capacity_);
  } else {
    delete[] data_;
  }
  data_ = nullptr;
  size_ = 0;
  capacity_ = 0;
  mapped_ = false;
  adopted_ = false;
}

}  // namespace cairn
