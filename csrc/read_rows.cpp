// The schema of read_rows: rows of a row-major table read straight from a file descriptor
// (io_uring or a pread thread pool, optionally O_DIRECT), returning the reads issued and the
// bytes read. CPU kernel: cpu/read_rows_kernel.cpp.
#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(graphengine, m) {
  m.def(
      "read_rows(int fd, Tensor ids, Tensor(a!) out, int offset, int row_bytes, int num_rows, "
      "str engine, int queue_depth, int align) -> int[]");
  m.def("io_uring_probe() -> str");
}
