// The schemas of GAT's fused attention over a block's CSR adjacency, forward and backward. CPU
// kernels and argument checks: cpu/gat_kernel.cpp.
#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(graphengine, m) {
  m.def(
      "gat_attention(Tensor h, Tensor att_src, Tensor att_dst, Tensor rowptr, Tensor col, "
      "float negative_slope, bool self_loops, Tensor? dropout=None) "
      "-> (Tensor, Tensor, Tensor, Tensor)");
  m.def(
      "gat_attention_backward(Tensor grad_out, Tensor h, Tensor att_src, Tensor att_dst, "
      "Tensor alpha, Tensor score_src, Tensor score_dst, Tensor rowptr, Tensor col, "
      "float negative_slope, bool self_loops, Tensor? dropout=None) -> (Tensor, Tensor, Tensor)");
}
