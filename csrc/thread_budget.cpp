// The schema of set_intraop_threads: the calling thread's share of torch's intra-op threads;
// false where torch has no OpenMP. It takes no tensor, so its one implementation
// (cpu/thread_budget_kernel.cpp) is registered for every dispatch key.
#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(graphengine, m) {
  m.def("set_intraop_threads(int num_threads) -> bool");
}
