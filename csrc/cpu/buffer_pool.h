// A pool of large host buffers for gather outputs.
//
// A fresh 100 MB output per batch costs tens of thousands of page faults (measured here: a
// gather that takes 19 ms into a reused buffer takes 130 ms into a fresh one at 2 threads).
// Tensors from `pooled_empty` hand their buffer back to the pool when the last view of their
// storage dies, so that the next batch reuses it, faults already paid; like CUDA's caching
// host allocator, but for pageable memory.
#pragma once

#include <ATen/ATen.h>

namespace graphengine {

// An uninitialized contiguous CPU tensor; large ones come from the pool.
at::Tensor pooled_empty(at::IntArrayRef sizes, const at::TensorOptions& options);

}  // namespace graphengine
