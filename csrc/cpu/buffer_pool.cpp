#include "buffer_pool.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <iterator>
#include <map>
#include <mutex>
#include <new>

#include <pthread.h>
#include <unistd.h>

namespace graphengine {
namespace {

constexpr size_t kPage = 4096;
// Buffers come in size classes 2^e * (8 + m) / 8, m in [0, 8): at most 12.5% slack, so that
// batches of slightly different sizes share buffers.
constexpr int kClassSteps = 8;
// Freed buffers kept for reuse, at most: what pool_set_limit set (a process under a memory
// limit smaller than the machine's sets a share of its own), else a quarter of the machine's
// memory, and 2 GiB at least; the rest go back to the system.
std::atomic<int64_t> set_limit{-1};

size_t max_cached_bytes() {
  static const size_t machine_limit = [] {
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long page_size = sysconf(_SC_PAGESIZE);
    const size_t quarter = pages > 0 && page_size > 0
                               ? static_cast<size_t>(pages) * static_cast<size_t>(page_size) / 4
                               : 0;
    return std::max(quarter, size_t{2} << 30);
  }();
  const int64_t chosen = set_limit.load(std::memory_order_relaxed);
  return chosen >= 0 ? static_cast<size_t>(chosen) : machine_limit;
}
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
      // A miss: the largest cached buffer below the request is most likely the one this
      // request outgrew. Freeing it before the new one is mapped keeps the resident memory
      // at the working set, instead of growing by every buffer a batch outgrows.
      if (it != free_.begin()) {
        auto outgrown = std::prev(it);
        if (static_cast<double>(outgrown->first) >= kMinFill * bytes) {
          cached_bytes_ -= outgrown->first;
          std::free(outgrown->second);
          free_.erase(outgrown);
        }
      }
    }
    // Headroom, so that the next, slightly larger batch fits too.
    *capacity = size_class(bytes + bytes / kClassSteps);
    fresh_bytes_.fetch_add(*capacity, std::memory_order_relaxed);
    void* buffer = nullptr;
    // Page-aligned, small pages: huge pages make a fresh buffer much slower to fault in, since
    // the kernel compacts memory first.
    if (posix_memalign(&buffer, kPage, *capacity) != 0) {
      throw std::bad_alloc();
    }
    return buffer;
  }

  void release(void* buffer, size_t capacity) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (spans_ == 0 || capacity > max_cached_bytes()) {
      std::free(buffer);
      return;
    }
    while (cached_bytes_ + capacity > max_cached_bytes() && !free_.empty()) {
      auto smallest = free_.begin();
      cached_bytes_ -= smallest->first;
      std::free(smallest->second);
      free_.erase(smallest);
    }
    free_.emplace(capacity, buffer);
    cached_bytes_ += capacity;
  }

  void open_span() {
    std::lock_guard<std::mutex> lock(mutex_);
    ++spans_;
  }

  void close_span() {
    std::lock_guard<std::mutex> lock(mutex_);
    TORCH_CHECK(spans_ > 0, "the buffer pool has no open span to close");
    if (--spans_ > 0) {
      return;
    }
    for (const auto& [capacity, buffer] : free_) {
      std::free(buffer);
    }
    free_.clear();
    cached_bytes_ = 0;
  }

  size_t fresh_bytes() const { return fresh_bytes_.load(std::memory_order_relaxed); }

  int64_t spans() {
    std::lock_guard<std::mutex> lock(mutex_);
    return spans_;
  }

  size_t cached_bytes() {
    std::lock_guard<std::mutex> lock(mutex_);
    return cached_bytes_;
  }

  // fork() copies the mutex as the parent's other threads hold it: a child would deadlock on
  // a mutex held while it forked. These keep it free across the fork.
  void lock_for_fork() { mutex_.lock(); }
  void unlock_after_fork() { mutex_.unlock(); }

 private:
  std::mutex mutex_;
  std::multimap<size_t, void*> free_;
  size_t cached_bytes_ = 0;
  int64_t spans_ = 0;
  std::atomic<size_t> fresh_bytes_{0};
};

BufferPool& pool() {
  static BufferPool* instance = [] {
    auto* created = new BufferPool();  // never destroyed: tensors may outlive exit
    pthread_atfork([] { pool().lock_for_fork(); }, [] { pool().unlock_after_fork(); },
                   [] { pool().unlock_after_fork(); });
    return created;
  }();
  return *instance;
}

struct Lease {
  size_t capacity;
};

}  // namespace

void* pool_acquire(size_t bytes, size_t* capacity) { return pool().acquire(bytes, capacity); }

void pool_release(void* buffer, size_t capacity) { pool().release(buffer, capacity); }

void pool_open_span() { pool().open_span(); }

void pool_close_span() { pool().close_span(); }

int64_t pool_spans() { return pool().spans(); }

size_t pool_cached_bytes() { return pool().cached_bytes(); }

size_t pool_fresh_bytes() { return pool().fresh_bytes(); }

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
  void* buffer = pool_acquire(bytes, &capacity);
  auto* lease = new Lease{capacity};
  return at::from_blob(
      buffer, sizes,
      [lease](void* data) {
        pool_release(data, lease->capacity);
        delete lease;
      },
      options);
}

void pool_set_limit(int64_t bytes) { set_limit.store(bytes, std::memory_order_relaxed); }

}  // namespace graphengine
