// The row gathers' schemas (gather_rows, cached_gather) and the argument checks their CPU
// (cpu/gather_kernel.cpp) and CUDA (cuda/gather_kernel.cu) kernels share.
#include "gather.h"

#include <torch/library.h>

#include "cpu/buffer_pool.h"

namespace graphengine {

at::Tensor check_gather_args(const at::Tensor& src, const at::Tensor& index,
                             const std::optional<at::Tensor>& out, at::Device out_device) {
  TORCH_CHECK(src.dim() == 2, "gather_rows: 'src' must be 2-D (got ", src.dim(), "-D)");
  TORCH_CHECK(src.size(1) <= 1 || src.stride(1) == 1,
              "gather_rows: 'src' rows must be contiguous (got strides ", src.strides(),
              "); call .contiguous() first");
  TORCH_CHECK(index.dim() == 1, "gather_rows: 'index' must be 1-D (got ", index.dim(), "-D)");
  TORCH_CHECK(index.scalar_type() == at::kInt || index.scalar_type() == at::kLong,
              "gather_rows: 'index' must be int32 or int64 (got ", index.scalar_type(), ")");
  TORCH_CHECK(index.is_contiguous(), "gather_rows: 'index' must be contiguous");
  const int64_t n = index.numel();
  if (!out.has_value()) {
    const auto options = src.options().device(out_device);
    return out_device.is_cpu() ? pooled_empty({n, src.size(1)}, options)
                               : at::empty({n, src.size(1)}, options);
  }
  const at::Tensor& o = *out;
  TORCH_CHECK(o.scalar_type() == src.scalar_type(), "gather_rows: 'out' must have dtype ",
              src.scalar_type(), " like 'src' (got ", o.scalar_type(), ")");
  TORCH_CHECK(o.dim() == 2 && o.size(0) == n && o.size(1) == src.size(1),
              "gather_rows: 'out' must have shape [", n, ", ", src.size(1), "] (got ", o.sizes(),
              ")");
  TORCH_CHECK(o.is_contiguous(), "gather_rows: 'out' must be contiguous");
  TORCH_CHECK(o.device() == out_device, "gather_rows: 'out' must be on ", out_device, " (got ",
              o.device(), ")");
  return o;
}

void check_cache_args(const at::Tensor& src, const at::Tensor& cache, const at::Tensor& slot_of) {
  TORCH_CHECK(cache.dim() == 2 && cache.size(1) == src.size(1) &&
                  cache.scalar_type() == src.scalar_type() &&
                  (cache.size(1) <= 1 || cache.stride(1) == 1),
              "cached_gather: 'cache' must be a row-contiguous [slots, ", src.size(1), "] ",
              src.scalar_type(), " tensor (got ", cache.scalar_type(), " ", cache.sizes(), ")");
  TORCH_CHECK(slot_of.dim() == 1 && slot_of.numel() == src.size(0) &&
                  slot_of.scalar_type() == at::kInt && slot_of.is_contiguous(),
              "cached_gather: 'slot_of' must be a contiguous int32 [", src.size(0),
              "] tensor (got ", slot_of.scalar_type(), " ", slot_of.sizes(), ")");
}

void raise_bad_entry(int64_t position, int64_t id, int64_t num_rows, const at::Tensor* slot_of,
                     int64_t num_slots) {
  TORCH_CHECK_INDEX(id >= 0 && id < num_rows, "gather_rows: 'index' holds id ", id,
                    " at position ", position, ", outside [0, ", num_rows, ")");
  TORCH_CHECK_INDEX(slot_of == nullptr, "cached_gather: 'slot_of'[", id, "] = ",
                    slot_of->select(0, id).item<int32_t>(), " is outside the cache's [0, ",
                    num_slots, ") slots");
  TORCH_CHECK(false, "gather_rows: entry ", position, " of 'index' was reported bad (id ", id,
              ") but is not");
}

}  // namespace graphengine

TORCH_LIBRARY_FRAGMENT(graphengine, m) {
  m.def("gather_rows(Tensor src, Tensor index, Tensor? out=None) -> Tensor");
  m.def(
      "cached_gather(Tensor src, Tensor index, Tensor cache, Tensor slot_of, Tensor? out=None) "
      "-> Tensor");
}
