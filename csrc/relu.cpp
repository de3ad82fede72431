// The schemas of the dense layers' ReLU helpers: bias_relu_ (bias and ReLU in place) and
// relu_backward_sum (the ReLU's backward with the bias gradient's column sums). CPU kernels and
// argument checks: cpu/relu_kernel.cpp.
#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(graphengine, m) {
  m.def("relu_backward_sum(Tensor grad, Tensor out) -> (Tensor, Tensor)");
  m.def("bias_relu_(Tensor(a!) out, Tensor? bias=None) -> ()");
}
