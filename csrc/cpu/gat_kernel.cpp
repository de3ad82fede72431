// GAT's attention on a block's edges (PyG GATConv's math) without per-edge messages. Forward:
// the nodes' attention scores in one pass over h, then per destination its logits, softmax and
// weighted sum of its sources' rows. Backward: per destination, the gradient of its edges'
// logits; per source (the edges counting-sorted by source, so no two threads write one row),
// h's gradient through the weighted sums and the scores, and the attention vectors' gradient
// summed over fixed blocks of sources (so that the sums do not depend on the thread count).
//
// Shapes: h [num_src, heads, channels] (float, bfloat16 or half), att_src and att_dst float
// [heads, channels], rowptr int64 [num_dst + 1], col int64 [num_edges] (the sources of the
// edges into each destination, grouped by destination; destination d is source d). With
// self_loops, each destination d also has the edge from source d, and the block's own edges
// from d to d are dropped (alpha 0), as PyG's remove_self_loops + add_self_loops do; alpha is
// then float [num_edges + num_dst, heads], the self loops last. An optional `dropout` of
// alpha's shape scales each coefficient after the softmax (0, or 1 / (1 - p)).
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <tuple>
#include <type_traits>
#include <vector>

#include "row_loop.h"

namespace graphengine {
namespace {

constexpr int64_t kGrain = 16;
constexpr int64_t kSourceBlock = 256;      // sources per partial sum of the attention gradient
constexpr float kSoftmaxEpsilon = 1e-16f;  // PyG's softmax adds it to each sum

GRAPHENGINE_ROW_LOOP float dot(const float* a, const float* b, int64_t n) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) {
    sum += a[i] * b[i];
  }
  return sum;
}

// y += w * x
GRAPHENGINE_ROW_LOOP void axpy(float w, const float* x, float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    y[i] += w * x[i];
  }
}

// Row `j` of h as float: the row itself, or its conversion into `buffer`.
template <typename scalar_t>
const float* float_row(const scalar_t* h, int64_t j, int64_t width, float* buffer) {
  if constexpr (std::is_same_v<scalar_t, float>) {
    return h + j * width;
  } else {
    const scalar_t* row = h + j * width;
    for (int64_t i = 0; i < width; ++i) {
      buffer[i] = static_cast<float>(row[i]);
    }
    return buffer;
  }
}

struct Graph {
  const int64_t* rowptr;
  const int64_t* col;
  int64_t num_src;
  int64_t num_dst;
  int64_t num_edges;
  int64_t heads;
  int64_t channels;
  bool self_loops;
  const float* dropout;  // nullptr: none

  int64_t width() const { return heads * channels; }
  int64_t slots() const { return num_edges + (self_loops ? num_dst : 0); }

  // The source of edge e (into destination d), or -1 for an edge from d to d that self_loops
  // drops.
  int64_t source(int64_t e, int64_t d) const {
    const int64_t j = col[e];
    return self_loops && j == d ? -1 : j;
  }

  // The factor of slot `slot`'s coefficient for head k in the weighted sum.
  float kept(int64_t slot, int64_t k) const {
    return dropout == nullptr ? 1.0f : dropout[slot * heads + k];
  }

  // Calls visit(j, slot) for each edge into d that counts: its own, then its self loop.
  template <typename Visit>
  void for_each_edge(int64_t d, Visit&& visit) const {
    for (int64_t e = rowptr[d]; e < rowptr[d + 1]; ++e) {
      const int64_t j = source(e, d);
      if (j >= 0) {
        visit(j, e);
      }
    }
    if (self_loops) {
      visit(d, num_edges + d);
    }
  }
};

void check_attention(const at::Tensor& att, const char* name, int64_t heads, int64_t channels) {
  TORCH_CHECK(att.scalar_type() == at::kFloat && att.is_contiguous() &&
                  att.sizes() == at::IntArrayRef({heads, channels}),
              "gat_attention: '", name, "' must be contiguous float32 [", heads, ", ", channels,
              "] (got ", att.scalar_type(), " ", att.sizes(), ")");
}

Graph checked_graph(const at::Tensor& h, const at::Tensor& att_src, const at::Tensor& att_dst,
                    const at::Tensor& rowptr, const at::Tensor& col, bool self_loops,
                    const std::optional<at::Tensor>& dropout) {
  TORCH_CHECK(h.dim() == 3 && h.is_contiguous(),
              "gat_attention: 'h' must be a contiguous [num_src, heads, channels] tensor (got ",
              h.sizes(), ")");
  TORCH_CHECK(h.device().is_cpu(), "gat_attention (CPU): 'h' must be a CPU tensor");
  const int64_t num_src = h.size(0), heads = h.size(1), channels = h.size(2);
  check_attention(att_src, "att_src", heads, channels);
  check_attention(att_dst, "att_dst", heads, channels);
  TORCH_CHECK(rowptr.scalar_type() == at::kLong && col.scalar_type() == at::kLong &&
                  rowptr.dim() == 1 && col.dim() == 1 && rowptr.is_contiguous() &&
                  col.is_contiguous() && rowptr.numel() >= 1,
              "gat_attention: 'rowptr' and 'col' must be contiguous 1-D int64 tensors");
  const int64_t num_dst = rowptr.numel() - 1, num_edges = col.numel();
  TORCH_CHECK(num_dst <= num_src, "gat_attention: ", num_dst,
              " destinations need at least as many sources (got ", num_src, ")");
  const int64_t* ptr = rowptr.data_ptr<int64_t>();
  TORCH_CHECK(ptr[0] == 0 && ptr[num_dst] == num_edges,
              "gat_attention: 'rowptr' must run from 0 to ", num_edges, " (got ", ptr[0], " to ",
              ptr[num_dst], ")");
  for (int64_t d = 0; d < num_dst; ++d) {
    TORCH_CHECK(ptr[d] <= ptr[d + 1], "gat_attention: 'rowptr' decreases at ", d);
  }
  const int64_t* source = col.data_ptr<int64_t>();
  for (int64_t e = 0; e < num_edges; ++e) {
    TORCH_CHECK_INDEX(source[e] >= 0 && source[e] < num_src, "gat_attention: 'col' holds source ",
                      source[e], " at position ", e, ", outside [0, ", num_src, ")");
  }
  Graph g{ptr, source, num_src, num_dst, num_edges, heads, channels, self_loops, nullptr};
  if (dropout.has_value()) {
    TORCH_CHECK(dropout->scalar_type() == at::kFloat && dropout->is_contiguous() &&
                    dropout->sizes() == at::IntArrayRef({g.slots(), heads}),
                "gat_attention: 'dropout' must be contiguous float32 [", g.slots(), ", ", heads,
                "] (got ", dropout->scalar_type(), " ", dropout->sizes(), ")");
    g.dropout = dropout->data_ptr<float>();
  }
  return g;
}

inline float leaky_relu(float z, float slope) { return z > 0 ? z : z * slope; }

// score_src[j, k] = <h[j, k], att_src[k]>, and score_dst likewise for the destinations.
template <typename scalar_t>
void score_kernel(const Graph& g, const scalar_t* h, const float* att_src, const float* att_dst,
                  float* score_src, float* score_dst) {
  const int64_t width = g.width(), channels = g.channels;
  at::parallel_for(0, g.num_src, 256, [&](int64_t begin, int64_t end) {
    std::vector<float> buffer(width);
    for (int64_t j = begin; j < end; ++j) {
      const float* x = float_row(h, j, width, buffer.data());
      for (int64_t k = 0; k < g.heads; ++k) {
        const float* xk = x + k * channels;
        score_src[j * g.heads + k] = dot(xk, att_src + k * channels, channels);
        if (j < g.num_dst) {
          score_dst[j * g.heads + k] = dot(xk, att_dst + k * channels, channels);
        }
      }
    }
  });
}

template <typename scalar_t>
void forward_kernel(const Graph& g, const scalar_t* h, const float* score_src,
                    const float* score_dst, float slope, float* alpha, float* out) {
  const int64_t heads = g.heads, channels = g.channels, width = g.width();
  at::parallel_for(0, g.num_dst, kGrain, [&](int64_t begin, int64_t end) {
    std::vector<float> top(heads), total(heads), buffer(width);
    for (int64_t d = begin; d < end; ++d) {
      const float* sd = score_dst + d * heads;
      std::fill(top.begin(), top.end(), -std::numeric_limits<float>::infinity());
      std::fill(total.begin(), total.end(), 0.0f);
      for (int64_t e = g.rowptr[d]; e < g.rowptr[d + 1]; ++e) {  // dropped edges: alpha 0
        if (g.source(e, d) < 0) {
          std::fill(alpha + e * heads, alpha + (e + 1) * heads, 0.0f);
        }
      }
      g.for_each_edge(d, [&](int64_t j, int64_t slot) {
        float* a = alpha + slot * heads;
        for (int64_t k = 0; k < heads; ++k) {
          a[k] = leaky_relu(score_src[j * heads + k] + sd[k], slope);
          top[k] = std::max(top[k], a[k]);
        }
      });
      g.for_each_edge(d, [&](int64_t, int64_t slot) {
        float* a = alpha + slot * heads;
        for (int64_t k = 0; k < heads; ++k) {
          a[k] = std::exp(a[k] - top[k]);
          total[k] += a[k];
        }
      });
      float* row = out + d * width;
      std::fill(row, row + width, 0.0f);
      g.for_each_edge(d, [&](int64_t j, int64_t slot) {
        const float* x = float_row(h, j, width, buffer.data());
        float* a = alpha + slot * heads;
        for (int64_t k = 0; k < heads; ++k) {
          a[k] = a[k] / (total[k] + kSoftmaxEpsilon);
          axpy(a[k] * g.kept(slot, k), x + k * channels, row + k * channels, channels);
        }
      });
    }
  });
}

// Per destination: the gradient of each edge's logit (before the leaky ReLU) into `edge_grad`,
// and the destinations' score gradients.
template <typename scalar_t>
void logit_grad_kernel(const Graph& g, const float* grad, const scalar_t* h, const float* alpha,
                       const float* score_src, const float* score_dst, float slope,
                       float* edge_grad, float* grad_score_dst) {
  const int64_t heads = g.heads, channels = g.channels, width = g.width();
  at::parallel_for(0, g.num_dst, kGrain, [&](int64_t begin, int64_t end) {
    std::vector<float> weighted(heads), buffer(width);
    for (int64_t d = begin; d < end; ++d) {
      const float* go = grad + d * width;
      std::fill(weighted.begin(), weighted.end(), 0.0f);
      for (int64_t e = g.rowptr[d]; e < g.rowptr[d + 1]; ++e) {
        if (g.source(e, d) < 0) {
          std::fill(edge_grad + e * heads, edge_grad + (e + 1) * heads, 0.0f);
        }
      }
      g.for_each_edge(d, [&](int64_t j, int64_t slot) {  // d loss / d alpha (before dropout)
        const float* x = float_row(h, j, width, buffer.data());
        for (int64_t k = 0; k < heads; ++k) {
          const float value = dot(go + k * channels, x + k * channels, channels) * g.kept(slot, k);
          edge_grad[slot * heads + k] = value;
          weighted[k] += alpha[slot * heads + k] * value;
        }
      });
      float* gsd = grad_score_dst + d * heads;
      std::fill(gsd, gsd + heads, 0.0f);
      g.for_each_edge(d, [&](int64_t j, int64_t slot) {  // softmax, then leaky ReLU, backward
        for (int64_t k = 0; k < heads; ++k) {
          float& value = edge_grad[slot * heads + k];
          const float softmax_grad = alpha[slot * heads + k] * (value - weighted[k]);
          value = score_src[j * heads + k] + score_dst[d * heads + k] > 0 ? softmax_grad
                                                                          : softmax_grad * slope;
          gsd[k] += value;
        }
      });
    }
  });
}

// Per source: h's gradient (through the weighted sums and both scores) and, per block of
// kSourceBlock sources, the attention vectors' partial gradients ([blocks, 2, heads, channels]).
template <typename scalar_t>
void source_grad_kernel(const Graph& g, const float* grad, const scalar_t* h, const float* alpha,
                        const float* edge_grad, const float* att_src, const float* att_dst,
                        const float* grad_score_dst, const int64_t* source_ptr,
                        const int64_t* by_source, const int64_t* edge_dst, scalar_t* grad_h,
                        float* partial_att) {
  const int64_t heads = g.heads, channels = g.channels, width = g.width();
  const int64_t blocks = (g.num_src + kSourceBlock - 1) / kSourceBlock;
  at::parallel_for(0, blocks, 1, [&](int64_t first_block, int64_t last_block) {
    std::vector<float> row(width), score_grad(heads), buffer(width);
    for (int64_t b = first_block; b < last_block; ++b) {
      float* att_grad = partial_att + b * 2 * width;
      std::fill(att_grad, att_grad + 2 * width, 0.0f);
      const int64_t end = std::min(g.num_src, (b + 1) * kSourceBlock);
      for (int64_t j = b * kSourceBlock; j < end; ++j) {
        std::fill(row.begin(), row.end(), 0.0f);
        std::fill(score_grad.begin(), score_grad.end(), 0.0f);
        auto add = [&](int64_t slot, int64_t d) {
          const float* go = grad + d * width;
          for (int64_t k = 0; k < heads; ++k) {
            score_grad[k] += edge_grad[slot * heads + k];
            axpy(alpha[slot * heads + k] * g.kept(slot, k), go + k * channels,
                 row.data() + k * channels, channels);
          }
        };
        for (int64_t p = source_ptr[j]; p < source_ptr[j + 1]; ++p) {
          const int64_t e = by_source[p];
          add(e, edge_dst[e]);
        }
        if (g.self_loops && j < g.num_dst) {
          add(g.num_edges + j, j);
        }
        const float* x = float_row(h, j, width, buffer.data());
        for (int64_t k = 0; k < heads; ++k) {
          const int64_t at = k * channels;
          axpy(score_grad[k], att_src + at, row.data() + at, channels);
          axpy(score_grad[k], x + at, att_grad + at, channels);
          if (j < g.num_dst) {
            const float dst_grad = grad_score_dst[j * heads + k];
            axpy(dst_grad, att_dst + at, row.data() + at, channels);
            axpy(dst_grad, x + at, att_grad + width + at, channels);
          }
        }
        scalar_t* target = grad_h + j * width;
        for (int64_t i = 0; i < width; ++i) {
          target[i] = static_cast<scalar_t>(row[i]);
        }
      }
    }
  });
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> gat_attention_cpu(
    const at::Tensor& h, const at::Tensor& att_src, const at::Tensor& att_dst,
    const at::Tensor& rowptr, const at::Tensor& col, double negative_slope, bool self_loops,
    const std::optional<at::Tensor>& dropout) {
  const Graph g = checked_graph(h, att_src, att_dst, rowptr, col, self_loops, dropout);
  const auto options = att_src.options();
  auto score_src = at::empty({g.num_src, g.heads}, options);
  auto score_dst = at::empty({g.num_dst, g.heads}, options);
  auto alpha = at::empty({g.slots(), g.heads}, options);
  auto out = at::empty({g.num_dst, g.heads, g.channels}, options);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, h.scalar_type(), "gat_attention", [&] {
    const scalar_t* rows = h.data_ptr<scalar_t>();
    score_kernel<scalar_t>(g, rows, att_src.data_ptr<float>(), att_dst.data_ptr<float>(),
                           score_src.data_ptr<float>(), score_dst.data_ptr<float>());
    forward_kernel<scalar_t>(g, rows, score_src.data_ptr<float>(), score_dst.data_ptr<float>(),
                             static_cast<float>(negative_slope), alpha.data_ptr<float>(),
                             out.data_ptr<float>());
  });
  return {out, alpha, score_src, score_dst};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> gat_attention_backward_cpu(
    const at::Tensor& grad_out, const at::Tensor& h, const at::Tensor& att_src,
    const at::Tensor& att_dst, const at::Tensor& alpha, const at::Tensor& score_src,
    const at::Tensor& score_dst, const at::Tensor& rowptr, const at::Tensor& col,
    double negative_slope, bool self_loops, const std::optional<at::Tensor>& dropout) {
  const Graph g = checked_graph(h, att_src, att_dst, rowptr, col, self_loops, dropout);
  const int64_t heads = g.heads;
  auto check_float = [](const at::Tensor& t, const char* name, at::IntArrayRef shape) {
    TORCH_CHECK(t.scalar_type() == at::kFloat && t.is_contiguous() && t.sizes() == shape,
                "gat_attention_backward: '", name, "' must be contiguous float32 ", shape,
                " (got ", t.scalar_type(), " ", t.sizes(), ")");
  };
  check_float(alpha, "alpha", {g.slots(), heads});
  check_float(score_src, "score_src", {g.num_src, heads});
  check_float(score_dst, "score_dst", {g.num_dst, heads});
  const at::Tensor grad = grad_out.to(at::kFloat).contiguous();
  check_float(grad, "grad_out", {g.num_dst, heads, g.channels});

  // The edges grouped by source, in edge order within a source: a counting sort.
  auto source_ptr = at::zeros({g.num_src + 1}, rowptr.options());
  auto by_source = at::empty({g.num_edges}, rowptr.options());
  auto edge_dst = at::empty({g.num_edges}, rowptr.options());
  int64_t* ptr = source_ptr.data_ptr<int64_t>();
  int64_t* order = by_source.data_ptr<int64_t>();
  int64_t* dst = edge_dst.data_ptr<int64_t>();
  at::parallel_for(0, g.num_dst, 1024, [&](int64_t begin, int64_t end) {
    for (int64_t d = begin; d < end; ++d) {
      std::fill(dst + g.rowptr[d], dst + g.rowptr[d + 1], d);
    }
  });
  for (int64_t e = 0; e < g.num_edges; ++e) {
    ++ptr[g.col[e] + 1];
  }
  for (int64_t j = 0; j < g.num_src; ++j) {
    ptr[j + 1] += ptr[j];
  }
  {
    std::vector<int64_t> next(ptr, ptr + g.num_src);
    for (int64_t e = 0; e < g.num_edges; ++e) {
      order[next[g.col[e]]++] = e;
    }
  }

  const int64_t blocks = (g.num_src + kSourceBlock - 1) / kSourceBlock;
  auto edge_grad = at::empty({g.slots(), heads}, alpha.options());
  auto grad_score_dst = at::empty_like(score_dst);
  auto grad_h = at::empty_like(h);
  auto partial_att = at::empty({blocks, 2, heads, g.channels}, alpha.options());
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kBFloat16, at::kHalf, h.scalar_type(), "gat_attention_backward", [&] {
        const scalar_t* rows = h.data_ptr<scalar_t>();
        logit_grad_kernel<scalar_t>(g, grad.data_ptr<float>(), rows, alpha.data_ptr<float>(),
                                    score_src.data_ptr<float>(), score_dst.data_ptr<float>(),
                                    static_cast<float>(negative_slope),
                                    edge_grad.data_ptr<float>(), grad_score_dst.data_ptr<float>());
        source_grad_kernel<scalar_t>(g, grad.data_ptr<float>(), rows, alpha.data_ptr<float>(),
                                     edge_grad.data_ptr<float>(), att_src.data_ptr<float>(),
                                     att_dst.data_ptr<float>(), grad_score_dst.data_ptr<float>(),
                                     ptr, order, dst, grad_h.data_ptr<scalar_t>(),
                                     partial_att.data_ptr<float>());
      });
  auto grad_att = partial_att.sum(0);  // [2, heads, channels]
  return {grad_h, grad_att.select(0, 0), grad_att.select(0, 1)};
}

}  // namespace

TORCH_LIBRARY_IMPL(graphengine, CPU, m) {
  m.impl("gat_attention", &gat_attention_cpu);
  m.impl("gat_attention_backward", &gat_attention_backward_cpu);
}

}  // namespace graphengine
