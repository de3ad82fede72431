// The schemas of the host memory cache's controls: host_cache_open (a span in which torch's
// large CPU blocks come from the buffer pool; false where the cache could not take torch's
// allocator slot), host_cache_close and host_cache_state ([open spans, bytes cached, bytes
// taken from the system]) and host_cache_limit (the most bytes kept for reuse, -1 for the
// default). They take no tensor, so their one implementation
// (cpu/host_cache_kernel.cpp) is registered for every dispatch key.
#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(graphengine, m) {
  m.def("host_cache_open() -> bool");
  m.def("host_cache_close() -> ()");
  m.def("host_cache_state() -> int[]");
  m.def("host_cache_limit(int max_bytes) -> ()");
}
