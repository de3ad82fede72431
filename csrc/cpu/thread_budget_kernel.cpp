// A per-thread share of torch's intra-op threads, for the loader's worker threads.
//
// torch's at::set_num_threads (torch.set_num_threads) also changes the process-wide count that
// every thread starting later picks up. With the OpenMP backend the team size of
// at::parallel_for is the calling thread's own OpenMP setting, so setting only that gives one
// thread a share of the machine without touching any other thread.
#include <ATen/Parallel.h>
#include <torch/library.h>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace graphengine {
namespace {

bool set_intraop_threads(int64_t num_threads) {
  TORCH_CHECK(num_threads >= 1, "set_intraop_threads: 'num_threads' must be >= 1 (got ",
              num_threads, ")");
  // torch sets each thread's count once, on its first parallel op: do that first, so that it
  // does not undo the share later.
  at::internal::lazy_init_num_threads();
#ifdef _OPENMP
  omp_set_num_threads(static_cast<int>(num_threads));
  return true;
#else
  return false;
#endif
}

}  // namespace

// No tensor argument, so no backend to dispatch on: the one implementation serves every key,
// as an op defined with its function would.
TORCH_LIBRARY_IMPL(graphengine, CompositeImplicitAutograd, m) {
  m.impl("set_intraop_threads", &set_intraop_threads);
}

}  // namespace graphengine
