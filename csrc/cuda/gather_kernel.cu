// CUDA row gathers, a warp per row with the widest aligned loads (16 bytes when rows allow):
//   (a) from a GPU-resident table;
//   (b) zero-copy (UVA) from a pinned or host-registered CPU table straight into GPU memory;
//   (c) cached: rows whose id has a slot in a GPU cache come from it, the rest by zero-copy.
//
// Bad ids are checked on the device, without a host sync: reading a flag back after each
// launch (`.item()`) would stall the caller until the gather is done and serialise the
// loader's copy stream with its compute. A warp whose id is outside [0, num_rows) (or whose
// cached slot is not a row of the cache) fails a device-side assertion naming the id and its
// position, and writes nothing. The assertion aborts the kernel and poisons the CUDA context:
// the launch's stream, and every later CUDA call of the process, raise "device-side assert
// triggered", so that no batch with unwritten rows is ever used silently, and nothing is
// read or written out of bounds. The error is asynchronous (it surfaces at the next sync) and
// not recoverable, so callers with ids on the host validate them there first, where a bad id
// is a plain IndexError: graphengine.ops.check_index, used by the loader before it copies
// ids to the GPU; the CPU kernel reports the first bad position through raise_bad_entry.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <cstdio>

#include "../gather.h"

// torch added CUDA_KERNEL_ASSERT_PRINTF in 2.9; with an older torch, print the message and
// fail the plain device-side assertion.
#ifndef CUDA_KERNEL_ASSERT_PRINTF
#define CUDA_KERNEL_ASSERT_PRINTF(cond, msg, ...) \
  do {                                            \
    if (!(cond)) {                                \
      printf(msg "\n", __VA_ARGS__);              \
    }                                             \
    CUDA_KERNEL_ASSERT(cond);                     \
  } while (0)
#endif

namespace graphengine {
namespace {

constexpr int kWarp = 32;
constexpr int kWarpsPerBlock = 8;

template <typename vec_t, typename index_t>
__global__ void gather_rows_kernel(const char* __restrict__ src, int64_t src_stride,
                                   int64_t num_rows, const char* __restrict__ cache,
                                   int64_t cache_stride, int64_t num_slots,
                                   const int32_t* __restrict__ slot_of,
                                   const index_t* __restrict__ index, int64_t count,
                                   char* __restrict__ out, int64_t row_vecs) {
  const int lane = threadIdx.x % kWarp;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
       i < count; i += warps) {
    const int64_t id = static_cast<int64_t>(index[i]);
    const char* row = nullptr;
    const bool in_range = id >= 0 && id < num_rows;
    const int32_t slot = in_range && slot_of != nullptr ? slot_of[id] : -1;
    if (in_range) {
      if (slot < 0) {
        row = src + id * src_stride;
      } else if (slot < num_slots) {
        row = cache + static_cast<int64_t>(slot) * cache_stride;
      }
    }
    if (row == nullptr) {
      // See the top of this file: a device-side assertion, not a flag read back by the host.
      if (lane == 0) {
        CUDA_KERNEL_ASSERT_PRINTF(in_range,
                                  "gather_rows: 'index' holds id %lld at position %lld, "
                                  "outside [0, %lld)",
                                  static_cast<long long>(id), static_cast<long long>(i),
                                  static_cast<long long>(num_rows));
        CUDA_KERNEL_ASSERT_PRINTF(row != nullptr,
                                  "cached_gather: 'slot_of'[%lld] = %d is outside the cache's "
                                  "[0, %lld) slots",
                                  static_cast<long long>(id), static_cast<int>(slot),
                                  static_cast<long long>(num_slots));
      }
      continue;  // where assertions are compiled out: still never read or write out of bounds
    }
    const vec_t* from = reinterpret_cast<const vec_t*>(row);
    vec_t* to = reinterpret_cast<vec_t*>(out + i * row_vecs * sizeof(vec_t));
    for (int64_t v = lane; v < row_vecs; v += kWarp) {
      to[v] = from[v];
    }
  }
}

bool aligned(const void* pointer, int64_t stride, int64_t row_bytes, int64_t width) {
  return reinterpret_cast<uintptr_t>(pointer) % width == 0 && stride % width == 0 &&
         row_bytes % width == 0;
}

// A device-visible address of `table`: itself on the GPU, its mapped address when pinned.
const char* device_address(const at::Tensor& table, const char* name) {
  if (table.is_cuda()) {
    return static_cast<const char*>(table.data_ptr());
  }
  TORCH_CHECK(table.is_pinned(), "gather_rows (CUDA): '", name,
              "' is a CPU tensor that is not pinned; pin it (tensor.pin_memory() or "
              "FeatureStore.pin_memory_()) or move it to the GPU");
  void* mapped = nullptr;
  C10_CUDA_CHECK(cudaHostGetDevicePointer(&mapped, table.data_ptr(), 0));
  return static_cast<const char*>(mapped);
}

at::Tensor gather_cuda(const at::Tensor& src, const at::Tensor& index, const at::Tensor* cache,
                       const at::Tensor* slot_of, const std::optional<at::Tensor>& out) {
  TORCH_CHECK(index.is_cuda(), "gather_rows (CUDA): 'index' must be a CUDA tensor");
  const c10::cuda::CUDAGuard guard(index.device());
  TORCH_CHECK(!src.is_cuda() || src.device() == index.device(),
              "gather_rows (CUDA): 'src' and 'index' must be on the same device");
  at::Tensor result = check_gather_args(src, index, out, index.device());
  const int64_t count = index.numel();
  const int64_t element = src.element_size();
  const int64_t row_bytes = src.size(1) * element;
  if (count == 0 || row_bytes == 0) {
    return result;
  }
  const char* base = device_address(src, "src");
  const int64_t src_stride = src.stride(0) * element;
  const char* cached = cache ? static_cast<const char*>(cache->data_ptr()) : nullptr;
  const int64_t cache_stride = cache ? cache->stride(0) * element : 0;
  const int64_t num_slots = cache ? cache->size(0) : 0;
  const int32_t* slots = slot_of ? slot_of->data_ptr<int32_t>() : nullptr;
  char* target = static_cast<char*>(result.data_ptr());

  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const int64_t blocks_needed = (count + kWarpsPerBlock - 1) / kWarpsPerBlock;
  const int blocks = static_cast<int>(std::min<int64_t>(blocks_needed, 65535LL * 8));
  const bool wide = aligned(base, src_stride, row_bytes, 16) &&
                    aligned(target, row_bytes, row_bytes, 16) &&
                    (!cache || aligned(cached, cache_stride, row_bytes, 16));
  const bool word = aligned(base, src_stride, row_bytes, 4) &&
                    aligned(target, row_bytes, row_bytes, 4) &&
                    (!cache || aligned(cached, cache_stride, row_bytes, 4));

  AT_DISPATCH_INDEX_TYPES(index.scalar_type(), "gather_rows_cuda", [&] {
    const index_t* ids = index.data_ptr<index_t>();
    auto launch = [&](auto vec) {
      using vec_t = decltype(vec);
      gather_rows_kernel<vec_t, index_t>
          <<<blocks, kWarp * kWarpsPerBlock, 0, stream>>>(
              base, src_stride, src.size(0), cached, cache_stride, num_slots, slots, ids, count,
              target, row_bytes / static_cast<int64_t>(sizeof(vec_t)));
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    };
    if (wide) {
      launch(uint4{});
    } else if (word) {
      launch(uint32_t{});
    } else {
      launch(uint8_t{});
    }
  });
  return result;
}

at::Tensor gather_rows_cuda(const at::Tensor& src, const at::Tensor& index,
                            const std::optional<at::Tensor>& out) {
  return gather_cuda(src, index, nullptr, nullptr, out);
}

at::Tensor cached_gather_cuda(const at::Tensor& src, const at::Tensor& index,
                              const at::Tensor& cache, const at::Tensor& slot_of,
                              const std::optional<at::Tensor>& out) {
  TORCH_CHECK(cache.is_cuda() && slot_of.is_cuda() && cache.device() == index.device() &&
                  slot_of.device() == index.device(),
              "cached_gather (CUDA): 'cache' and 'slot_of' must be on the GPU of 'index'");
  check_cache_args(src, cache, slot_of);
  return gather_cuda(src, index, &cache, &slot_of, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(graphengine, CUDA, m) {
  m.impl("gather_rows", &gather_rows_cuda);
  m.impl("cached_gather", &cached_gather_cuda);
}

}  // namespace graphengine
