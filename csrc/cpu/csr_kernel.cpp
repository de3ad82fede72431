// A weighted CSR product: out[i] = sum over e in [rowptr[i], rowptr[i + 1]) of
// value[e] * x[col[e]] (value 1 when absent): the sum, mean or normalized aggregation of a
// block's sources into its destinations, and, over the edges grouped by source, its transpose.
//
// Rows of x (float, bfloat16 or half) are summed in float32, and the result is written in x's
// dtype. torch's own CSR kernel converts bfloat16 element by element and runs slower on it than
// on float32; here the conversion is part of the vectorized row loop. Each row's sources are
// prefetched a few edges ahead, since they lie scattered over a table much larger than the
// caches.
//
// Shapes: rowptr int64 [num_rows + 1] (0 first, num_edges last, nondecreasing), col int64
// [num_edges] in [0, x.size(0)), value float32 [num_edges] or none, x [num_src, width] with
// contiguous rows; out [num_rows, width] of x's dtype with contiguous rows (a new contiguous
// tensor, or the given `out`, e.g. the left columns of a wider table).
#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <optional>
#include <type_traits>
#include <vector>

#include "buffer_pool.h"
#include "row_loop.h"

namespace graphengine {
namespace {

constexpr int64_t kPrefetchEdges = 4;  // how far ahead a row's sources are prefetched
constexpr int64_t kCacheLine = 64;

// acc += w * x, x float.
GRAPHENGINE_ROW_LOOP void add_scaled(float w, const float* x, float* acc, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    acc[i] += w * x[i];
  }
}

// acc += w * x, x bfloat16 (its bits are a float's upper half).
GRAPHENGINE_ROW_LOOP void add_scaled(float w, const uint16_t* x, float* acc, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    acc[i] += w * bfloat16_to_float(x[i]);
  }
}

// out = acc rounded to bfloat16 (to nearest even; NaN stays NaN), as c10::BFloat16 rounds.
GRAPHENGINE_ROW_LOOP void store_bfloat16(const float* acc, uint16_t* out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &acc[i], sizeof bits);
    const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
    out[i] = acc[i] != acc[i] ? static_cast<uint16_t>(0x7fc0u) : static_cast<uint16_t>(rounded);
  }
}

template <typename scalar_t>
void add_scaled_row(float w, const scalar_t* x, float* acc, int64_t n) {
  if constexpr (std::is_same_v<scalar_t, float>) {
    add_scaled(w, x, acc, n);
  } else if constexpr (std::is_same_v<scalar_t, at::BFloat16>) {
    add_scaled(w, reinterpret_cast<const uint16_t*>(x), acc, n);
  } else {
    for (int64_t i = 0; i < n; ++i) {
      acc[i] += w * static_cast<float>(x[i]);
    }
  }
}

void prefetch_row(const void* row, int64_t bytes) {
  const char* p = static_cast<const char*>(row);
  for (int64_t offset = 0; offset < bytes; offset += kCacheLine) {
    __builtin_prefetch(p + offset);
  }
}

void check_csr(const at::Tensor& rowptr, const at::Tensor& col,
               const std::optional<at::Tensor>& value, const at::Tensor& x) {
  TORCH_CHECK(x.dim() == 2 && (x.size(1) <= 1 || x.stride(1) == 1),
              "csr_sum: 'x' must be 2-D with contiguous rows (got sizes ", x.sizes(), ", strides ",
              x.strides(), ")");
  TORCH_CHECK(x.device().is_cpu(), "csr_sum (CPU): 'x' must be a CPU tensor");
  TORCH_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16 ||
                  x.scalar_type() == at::kHalf,
              "csr_sum: 'x' must be float32, bfloat16 or float16 (got ", x.scalar_type(), ")");
  TORCH_CHECK(rowptr.scalar_type() == at::kLong && col.scalar_type() == at::kLong &&
                  rowptr.dim() == 1 && col.dim() == 1 && rowptr.is_contiguous() &&
                  col.is_contiguous() && rowptr.numel() >= 1,
              "csr_sum: 'rowptr' and 'col' must be contiguous 1-D int64 tensors (got ",
              rowptr.scalar_type(), " ", rowptr.sizes(), " and ", col.scalar_type(), " ",
              col.sizes(), ")");
  const int64_t num_rows = rowptr.numel() - 1, num_edges = col.numel(), num_src = x.size(0);
  if (value.has_value()) {
    TORCH_CHECK(value->scalar_type() == at::kFloat && value->dim() == 1 &&
                    value->numel() == num_edges && value->is_contiguous(),
                "csr_sum: 'value' must be a contiguous float32 [", num_edges, "] tensor (got ",
                value->scalar_type(), " ", value->sizes(), ")");
  }
  const int64_t* ptr = rowptr.data_ptr<int64_t>();
  TORCH_CHECK(ptr[0] == 0 && ptr[num_rows] == num_edges, "csr_sum: 'rowptr' must run from 0 to ",
              num_edges, " (got ", ptr[0], " to ", ptr[num_rows], ")");
  const int64_t* source = col.data_ptr<int64_t>();
  // Checked in parallel (a pass over the edges), reported serially for the first bad entry.
  std::atomic<bool> bad{false};
  at::parallel_for(0, num_rows, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      if (ptr[i] > ptr[i + 1]) {
        bad = true;
        return;
      }
    }
    // A decrease in another chunk can put this chunk's bounds outside the edges.
    if (ptr[begin] < 0 || ptr[end] > num_edges) {
      bad = true;
      return;
    }
    for (int64_t e = ptr[begin]; e < ptr[end]; ++e) {
      if (source[e] < 0 || source[e] >= num_src) {
        bad = true;
        return;
      }
    }
  });
  if (!bad) {
    return;
  }
  for (int64_t i = 0; i < num_rows; ++i) {
    TORCH_CHECK(ptr[i] <= ptr[i + 1], "csr_sum: 'rowptr' decreases at ", i, " (", ptr[i], " to ",
                ptr[i + 1], ")");
  }
  for (int64_t e = 0; e < num_edges; ++e) {
    TORCH_CHECK_INDEX(source[e] >= 0 && source[e] < num_src, "csr_sum: 'col' holds source ",
                      source[e], " at position ", e, ", outside [0, ", num_src, ")");
  }
}

template <typename scalar_t>
void csr_sum_kernel(const int64_t* rowptr, const int64_t* col, const float* value,
                    const scalar_t* x, int64_t x_stride, int64_t num_rows, int64_t width,
                    scalar_t* out, int64_t out_stride) {
  const int64_t row_bytes = width * static_cast<int64_t>(sizeof(scalar_t));
  at::parallel_for(0, num_rows, 64, [&](int64_t begin, int64_t end) {
    std::vector<float> buffer(std::is_same_v<scalar_t, float> ? 0 : width);
    // The chunk's edges are contiguous: prefetch by edge, across its rows.
    const int64_t edges_end = rowptr[end];
    for (int64_t e = rowptr[begin]; e < std::min(rowptr[begin] + kPrefetchEdges, edges_end); ++e) {
      prefetch_row(x + col[e] * x_stride, row_bytes);
    }
    for (int64_t i = begin; i < end; ++i) {
      float* acc = std::is_same_v<scalar_t, float>
                       ? reinterpret_cast<float*>(out + i * out_stride)
                       : buffer.data();
      std::fill(acc, acc + width, 0.0f);
      for (int64_t e = rowptr[i]; e < rowptr[i + 1]; ++e) {
        if (e + kPrefetchEdges < edges_end) {
          prefetch_row(x + col[e + kPrefetchEdges] * x_stride, row_bytes);
        }
        add_scaled_row(value == nullptr ? 1.0f : value[e], x + col[e] * x_stride, acc, width);
      }
      if constexpr (std::is_same_v<scalar_t, at::BFloat16>) {
        store_bfloat16(acc, reinterpret_cast<uint16_t*>(out + i * out_stride), width);
      } else if constexpr (!std::is_same_v<scalar_t, float>) {
        scalar_t* row = out + i * out_stride;
        for (int64_t k = 0; k < width; ++k) {
          row[k] = static_cast<scalar_t>(acc[k]);
        }
      }
    }
  });
}

at::Tensor csr_sum_cpu(const at::Tensor& rowptr, const at::Tensor& col,
                       const std::optional<at::Tensor>& value, const at::Tensor& x,
                       const std::optional<at::Tensor>& given_out) {
  check_csr(rowptr, col, value, x);
  const int64_t num_rows = rowptr.numel() - 1, width = x.size(1);
  at::Tensor out;
  if (given_out.has_value()) {
    out = *given_out;
    TORCH_CHECK(out.scalar_type() == x.scalar_type() && out.device().is_cpu() &&
                    out.dim() == 2 && out.size(0) == num_rows && out.size(1) == width &&
                    (width <= 1 || out.stride(1) == 1),
                "csr_sum: 'out' must be a CPU ", x.scalar_type(), " [", num_rows, ", ", width,
                "] tensor with contiguous rows (got ", out.scalar_type(), " ", out.sizes(),
                ", strides ", out.strides(), ")");
    at::assert_no_internal_overlap(out);
    at::assert_no_overlap(out, x);
  } else {
    out = pooled_empty({num_rows, width}, x.options());
  }
  if (num_rows == 0 || width == 0) {
    return out;
  }
  const int64_t* ptr = rowptr.data_ptr<int64_t>();
  const int64_t* source = col.data_ptr<int64_t>();
  const float* weight = value.has_value() ? value->data_ptr<float>() : nullptr;
  const int64_t stride = x.size(0) > 0 ? x.stride(0) : width;
  const int64_t out_stride = out.stride(0);
  const auto run = [&](auto type_tag) {
    using scalar_t = decltype(type_tag);
    csr_sum_kernel<scalar_t>(ptr, source, weight, x.data_ptr<scalar_t>(), stride, num_rows,
                             width, out.data_ptr<scalar_t>(), out_stride);
  };
  switch (x.scalar_type()) {  // check_csr allowed these three
    case at::kFloat:
      run(float{});
      break;
    case at::kBFloat16:
      run(at::BFloat16{});
      break;
    default:
      run(at::Half{});
  }
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(graphengine, CPU, m) { m.impl("csr_sum", &csr_sum_cpu); }

}  // namespace graphengine
