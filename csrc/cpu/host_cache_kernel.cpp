// torch's CPU allocator, serving large blocks from the buffer pool while graphengine trains.
//
// glibc maps every block above its mmap threshold (at most 32 MB, however it adapts) fresh and
// unmaps it when freed, so a training step whose activations are hundreds of MB pays their
// page faults again every step, and those faults take a large share of a GraphSAGE step on a
// large batch. This allocator removes most of them, as glibc told to keep freed memory
// (mallopt) does, but keeps the reuse to the spans in which a graphengine loader is iterated
// or its Trainer fits (the pool's spans): it is installed once, in front of the
// allocator torch had; blocks of at least kMinPooledBytes come from the pool while a span is
// open (buffer_pool.h), everything else goes to the previous allocator as before. When the
// last span closes, the cached buffers go back to the system.
//
// Blocks from the pool are not reported to torch's CPU memory profiler.
#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <torch/library.h>

#include <mutex>
#include <unordered_map>

#include <pthread.h>

#include "buffer_pool.h"

namespace graphengine {
namespace {

class HostCacheAllocator final : public c10::Allocator {
 public:
  explicit HostCacheAllocator(c10::Allocator* previous) : previous_(previous) {}

  c10::DataPtr allocate(size_t bytes) override {
    if (bytes < kMinPooledBytes || pool_spans() == 0) {
      return previous_->allocate(bytes);
    }
    size_t capacity = 0;
    void* buffer = pool_acquire(bytes, &capacity);
    {
      std::lock_guard<std::mutex> lock(leases_mutex_);
      leases_.emplace(buffer, capacity);
    }
    return {buffer, buffer, &release_pooled, c10::Device(c10::DeviceType::CPU)};
  }

  // Frees what either allocator gave (torch's raw_allocate/raw_deallocate), or nullptr when
  // the previous allocator has no raw interface.
  c10::DeleterFnPtr raw_deleter() const override {
    return previous_->raw_deleter() != nullptr ? &release_any : nullptr;
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

  // fork() copies the mutex as another thread may hold it; these keep it free across the
  // fork (as the pool does its own, buffer_pool.cpp).
  void lock_for_fork() { leases_mutex_.lock(); }
  void unlock_after_fork() { leases_mutex_.unlock(); }

 private:
  static bool give_back(void* buffer) {
    auto& self = *instance_;
    size_t capacity = 0;
    {
      std::lock_guard<std::mutex> lock(self.leases_mutex_);
      auto it = self.leases_.find(buffer);
      if (it == self.leases_.end()) {
        return false;
      }
      capacity = it->second;
      self.leases_.erase(it);
    }
    pool_release(buffer, capacity);
    return true;
  }

  static void release_pooled(void* buffer) { give_back(buffer); }

  static void release_any(void* buffer) {
    if (!give_back(buffer)) {
      instance_->previous_->raw_deleter()(buffer);
    }
  }

  c10::Allocator* previous_;
  std::mutex leases_mutex_;
  std::unordered_map<void*, size_t> leases_;

 public:
  static HostCacheAllocator* instance_;
};

HostCacheAllocator* HostCacheAllocator::instance_ = nullptr;
std::mutex install_mutex;

// Installs the allocator in front of torch's current CPU allocator, once; false where another
// allocator took torch's slot with a higher priority.
bool install() {
  std::lock_guard<std::mutex> lock(install_mutex);
  if (HostCacheAllocator::instance_ == nullptr) {
    // Never destroyed: tensors from it may outlive everything else.
    HostCacheAllocator::instance_ = new HostCacheAllocator(c10::GetCPUAllocator());
    pthread_atfork([] { HostCacheAllocator::instance_->lock_for_fork(); },
                   [] { HostCacheAllocator::instance_->unlock_after_fork(); },
                   [] { HostCacheAllocator::instance_->unlock_after_fork(); });
    c10::SetCPUAllocator(HostCacheAllocator::instance_, /*priority=*/0);
  }
  return c10::GetCPUAllocator() == HostCacheAllocator::instance_;
}

// Opens a span; false (nothing opened) where the allocator could not take torch's slot.
bool host_cache_open() {
  if (!install()) {
    return false;
  }
  pool_open_span();
  return true;
}

void host_cache_close() { pool_close_span(); }

void host_cache_limit(int64_t max_bytes) {
  TORCH_CHECK(max_bytes >= -1, "host_cache_limit: 'max_bytes' must be >= -1 (got ", max_bytes,
              ")");
  pool_set_limit(max_bytes);
}

std::vector<int64_t> host_cache_state() {
  return {pool_spans(), static_cast<int64_t>(pool_cached_bytes()),
          static_cast<int64_t>(pool_fresh_bytes())};
}

}  // namespace

// No tensor arguments, so no backend to dispatch on: the one implementation serves every key,
// as an op defined with its function would.
TORCH_LIBRARY_IMPL(graphengine, CompositeImplicitAutograd, m) {
  m.impl("host_cache_open", &host_cache_open);
  m.impl("host_cache_close", &host_cache_close);
  m.impl("host_cache_state", &host_cache_state);
  m.impl("host_cache_limit", &host_cache_limit);
}

}  // namespace graphengine
