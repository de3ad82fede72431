// The schema of prefetch_rows: asynchronous reads of a memory-mapped table's rows ahead of a
// gather, returning how many page ranges were advised. CPU kernel: cpu/prefetch_kernel.cpp.
#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(graphengine, m) {
  m.def("prefetch_rows(Tensor src, Tensor index, Tensor? slot_of=None) -> int");
}
