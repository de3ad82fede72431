#include "buffer_pool.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>

namespace graphengine {
namespace {

constexpr size_t kPage = 4096;
// Buffers come in size classes 2^e * (8 + m) / 8, m in [0, 8): at most 12.5% slack, so that
// batches of slightly different sizes share buffers.
constexpr int kClassSteps = 8;
// Below this, torch's allocator is as fast; above, reuse saves the page faults.
constexpr size_t kMinPooledBytes = size_t{4} << 20;
// Freed buffers kept for reuse, at most; the rest go back to the system.
constexpr size_t kMaxCachedBytes = size_t{2} << 30;
// A cached buffer serves a request of at least this fraction of its size.
constexpr double kMinFill = 0.5;

size_t size_class(size_t bytes) {
  size_t power = 1;
  while (power * 2 <= bytes) {
    power *= 2;
  }
  const size_t step = std::max<size_t>(power / kClassSteps, 1);
  const size_t rounded = (bytes + step - 1) / step * step;
  return (rounded + kPage - 1) / kPage * kPage;
}

class BufferPool {
 public:
  void* acquire(size_t bytes, size_t* capacity) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = free_.lower_bound(bytes);
      if (it != free_.end() && static_cast<double>(bytes) >= kMinFill * it->first) {
        *capacity = it->first;
        void* buffer = it->second;
        cached_bytes_ -= it->first;
        free_.erase(it);
        return buffer;
      }
    }
    // Headroom, so that the next, slightly larger batch fits too.
    *capacity = size_class(bytes + bytes / kClassSteps);
    void* buffer = nullptr;
    // Page-aligned, small pages: asking for huge pages here made fresh buffers 10x slower
    // to fault in (the kernel compacts memory first).
    if (posix_memalign(&buffer, kPage, *capacity) != 0) {
      throw std::bad_alloc();
    }
    return buffer;
  }

  void release(void* buffer, size_t capacity) {
    std::lock_guard<std::mutex> lock(mutex_);
    while (cached_bytes_ + capacity > kMaxCachedBytes && !free_.empty()) {
      auto smallest = free_.begin();
      cached_bytes_ -= smallest->first;
      std::free(smallest->second);
      free_.erase(smallest);
    }
    if (capacity > kMaxCachedBytes) {
      std::free(buffer);
      return;
    }
    free_.emplace(capacity, buffer);
    cached_bytes_ += capacity;
  }

 private:
  std::mutex mutex_;
  std::multimap<size_t, void*> free_;
  size_t cached_bytes_ = 0;
};

BufferPool& pool() {
  static BufferPool* instance = new BufferPool();  // never destroyed: tensors may outlive exit
  return *instance;
}

struct Lease {
  size_t capacity;
};

}  // namespace

at::Tensor pooled_empty(at::IntArrayRef sizes, const at::TensorOptions& options) {
  int64_t numel = 1;
  for (const int64_t size : sizes) {
    numel *= size;
  }
  const size_t bytes = static_cast<size_t>(numel) * options.dtype().itemsize();
  if (bytes < kMinPooledBytes) {
    return at::empty(sizes, options);
  }
  size_t capacity = 0;
  void* buffer = pool().acquire(bytes, &capacity);
  auto* lease = new Lease{capacity};
  return at::from_blob(
      buffer, sizes,
      [lease](void* data) {
        pool().release(data, lease->capacity);
        delete lease;
      },
      options);
}

}  // namespace graphengine
