// The schemas of the weighted CSR products: csr_sum (a new result), csr_sum_into (into a given
// table, optionally with the root rows, a row index and a ReLU on the sources), input_gradient
// (the backward over the transposed adjacency) and csr_transpose. CPU kernels, shapes and
// argument checks: cpu/csr_kernel.cpp.
#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(graphengine, m) {
  m.def("csr_sum(Tensor rowptr, Tensor col, Tensor? value, Tensor x) -> Tensor");
  m.def(
      "input_gradient(Tensor rowptr, Tensor col, Tensor? value, Tensor grad, "
      "Tensor? root_grad=None, Tensor? relu_input=None, bool column_sums=True) "
      "-> (Tensor, Tensor)");
  m.def(
      "csr_sum_into(Tensor rowptr, Tensor col, Tensor? value, Tensor x, Tensor(a!) out, "
      "Tensor(b!)? root_out=None, Tensor? index=None, bool relu=False) -> ()");
  m.def(
      "csr_transpose(Tensor rowptr, Tensor col, Tensor? value, int num_cols) "
      "-> (Tensor, Tensor, Tensor)");
}
