// Row gathers: out[i, :] = src[index[i], :] for 2-D tables of any dtype.
#pragma once

#include <ATen/ATen.h>

#include <optional>

namespace graphengine {

// Checks shared by every backend: shapes, dtypes, row-contiguity and the shape of `out`.
// Returns `out`, or a new tensor of [index.numel(), src.size(1)] on `out_device`.
at::Tensor check_gather_args(const at::Tensor& src, const at::Tensor& index,
                             const std::optional<at::Tensor>& out, at::Device out_device);

// Checks of cached_gather's `cache` ([slots, src.size(1)], src's dtype, rows contiguous) and
// `slot_of` (contiguous int32 [src.size(0)]: a slot of `cache` per row of `src`, or -1).
void check_cache_args(const at::Tensor& src, const at::Tensor& cache, const at::Tensor& slot_of);

// Raises the error for entry `position` of `index`, which held `id`: an id outside
// [0, num_rows), or (for cached_gather, `slot_of` given) a slot outside the cache's rows.
[[noreturn]] void raise_bad_entry(int64_t position, int64_t id, int64_t num_rows,
                                  const at::Tensor* slot_of, int64_t num_slots);

}  // namespace graphengine
