// The schema of transpose_into: a 2-D float32 table transposed into a given buffer. CPU kernel
// and argument checks: cpu/transpose_kernel.cpp.
#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(graphengine, m) {
  m.def("transpose_into(Tensor src, Tensor(a!) out) -> ()");
}
