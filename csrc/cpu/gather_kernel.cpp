// CPU row gathers: threads over rows (at::parallel_for, OpenMP in torch's CPU builds), one
// memcpy per row, the rows a few iterations ahead prefetched to hide memory latency.
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "../gather.h"

namespace graphengine {
namespace {

// Rows prefetched ahead: enough to cover a scattered row's memory latency on a batch's
// gather from a table far larger than the caches; a longer distance gains nothing more
// (docs/benchmarks-archive.md, issue 15).
constexpr int64_t kPrefetchDistance = 8;
constexpr int64_t kCacheLine = 64;
constexpr int64_t kMaxPrefetchLines = 16;
constexpr int64_t kGrain = 2048;

// Into L2, not L1 (locality 1, prefetcht2): the L1's few miss buffers cap how many of the
// scattered rows can be on their way at once, so the L1 hint leaves the gather slower and its
// time more variable.
inline void prefetch_row(const char* row, int64_t row_bytes) {
  const int64_t lines = std::min(kMaxPrefetchLines, (row_bytes + kCacheLine - 1) / kCacheLine);
  for (int64_t l = 0; l < lines; ++l) {
    __builtin_prefetch(row + l * kCacheLine, 0, 1);
  }
}

// Row i of `out` comes from `first` when slot_of (if given) has no slot for index[i], else
// from row slot_of[index[i]] of `second` (num_slots rows). Returns the first position whose id
// is out of range or whose slot is not a row of `second`; such rows are not written.
template <typename index_t, bool kCached>
int64_t gather_kernel(const char* first, int64_t first_stride, int64_t num_rows,
                      const char* second, int64_t second_stride, int64_t num_slots,
                      const int32_t* slot_of, const index_t* index, int64_t count, char* out,
                      int64_t row_bytes) {
  std::atomic<int64_t> first_bad{count};
  at::parallel_for(0, count, kGrain, [=, &first_bad](int64_t begin, int64_t end) {
    auto source = [=](int64_t id) -> const char* {
      if (id < 0 || id >= num_rows) {
        return nullptr;
      }
      if (kCached && slot_of[id] >= 0) {
        return slot_of[id] < num_slots ? second + static_cast<int64_t>(slot_of[id]) * second_stride
                                       : nullptr;
      }
      return first + id * first_stride;
    };
    for (int64_t i = begin; i < end; ++i) {
      if (i + kPrefetchDistance < end) {
        const char* ahead = source(static_cast<int64_t>(index[i + kPrefetchDistance]));
        if (ahead != nullptr) {
          prefetch_row(ahead, row_bytes);
        }
      }
      const char* row = source(static_cast<int64_t>(index[i]));
      if (row == nullptr) {
        int64_t seen = first_bad.load();
        while (i < seen && !first_bad.compare_exchange_weak(seen, i)) {
        }
        continue;
      }
      std::memcpy(out + i * row_bytes, row, row_bytes);
    }
  });
  return first_bad.load();
}

at::Tensor gather(const at::Tensor& src, const at::Tensor& index, const at::Tensor* cache,
                  const at::Tensor* slot_of, const std::optional<at::Tensor>& out) {
  TORCH_CHECK(src.device().is_cpu() && index.device().is_cpu(),
              "gather_rows (CPU): 'src' and 'index' must be CPU tensors");
  at::Tensor result = check_gather_args(src, index, out, src.device());
  const int64_t count = index.numel();
  const int64_t element = src.element_size();
  const int64_t row_bytes = src.size(1) * element;
  if (count == 0 || row_bytes == 0) {
    return result;
  }
  const char* base = static_cast<const char*>(src.data_ptr());
  const char* cached = cache ? static_cast<const char*>(cache->data_ptr()) : nullptr;
  const int64_t cache_stride = cache ? cache->stride(0) * element : 0;
  const int64_t num_slots = cache ? cache->size(0) : 0;
  const int32_t* slots = slot_of ? slot_of->data_ptr<int32_t>() : nullptr;
  char* target = static_cast<char*>(result.data_ptr());
  int64_t first_bad = count;
  AT_DISPATCH_INDEX_TYPES(index.scalar_type(), "gather_rows_cpu", [&] {
    const index_t* ids = index.data_ptr<index_t>();
    auto kernel = slots != nullptr ? gather_kernel<index_t, true> : gather_kernel<index_t, false>;
    first_bad = kernel(base, src.stride(0) * element, src.size(0), cached, cache_stride, num_slots,
                       slots, ids, count, target, row_bytes);
    if (first_bad < count) {
      raise_bad_entry(first_bad, static_cast<int64_t>(ids[first_bad]), src.size(0), slot_of,
                      num_slots);
    }
  });
  return result;
}

at::Tensor gather_rows_cpu(const at::Tensor& src, const at::Tensor& index,
                           const std::optional<at::Tensor>& out) {
  return gather(src, index, nullptr, nullptr, out);
}

at::Tensor cached_gather_cpu(const at::Tensor& src, const at::Tensor& index,
                             const at::Tensor& cache, const at::Tensor& slot_of,
                             const std::optional<at::Tensor>& out) {
  TORCH_CHECK(cache.device().is_cpu() && slot_of.device().is_cpu(),
              "cached_gather (CPU): 'cache' and 'slot_of' must be CPU tensors");
  check_cache_args(src, cache, slot_of);
  return gather(src, index, &cache, &slot_of, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(graphengine, CPU, m) {
  m.impl("gather_rows", &gather_rows_cpu);
  m.impl("cached_gather", &cached_gather_cpu);
}

}  // namespace graphengine
