// A pool of large host buffers, for gather outputs and, while graphengine trains, for torch's
// CPU tensors (host_cache_kernel.cpp).
//
// A fresh output of a hundred MB per batch costs tens of thousands of page faults, which take
// longer than the gather that fills it. Buffers handed back to the pool serve the next batch,
// faults already paid; like CUDA's caching host allocator, but for pageable memory. The pool
// keeps freed buffers only while a span is open (a graphengine loader pass, a Trainer's fit);
// when the last span closes, they go back to the system, and so does every buffer freed while
// none is open.
#pragma once

#include <ATen/ATen.h>

#include <cstddef>

namespace graphengine {

// Below this many bytes, the system allocator is as fast; above, reuse saves page faults.
constexpr size_t kMinPooledBytes = size_t{4} << 20;

// An uninitialized contiguous CPU tensor; large ones come from the pool.
at::Tensor pooled_empty(at::IntArrayRef sizes, const at::TensorOptions& options);

// A page-aligned buffer of at least `bytes` (its size in `*capacity`): a cached one that fits,
// else a new one.
void* pool_acquire(size_t bytes, size_t* capacity);

// Hands a buffer of `pool_acquire` back: kept for reuse while a span is open (up to the
// cache's limit), else to the system.
void pool_release(void* buffer, size_t capacity);

// Spans nest and may overlap across threads; closing the last returns the cached buffers to
// the system (buffers in use are not affected).
void pool_open_span();
void pool_close_span();
int64_t pool_spans();

// The most bytes of freed buffers kept for reuse from now on (-1: the default, a quarter of the
// machine's memory and at least 2 GiB); buffers over it go back to the system as they are freed.
void pool_set_limit(int64_t bytes);

// Bytes of the buffers cached for reuse.
size_t pool_cached_bytes();

// Bytes of the buffers the pool has taken from the system so far (misses).
size_t pool_fresh_bytes();

}  // namespace graphengine
