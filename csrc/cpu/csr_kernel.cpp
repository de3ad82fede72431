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
// contiguous rows; out [num_rows, width] of x's dtype with contiguous rows: a new contiguous
// tensor (csr_sum), or a given one (csr_sum_into: e.g. the left columns of a wider table),
// which torch's schemas cannot declare as one op that sometimes writes its input. With
// csr_sum_into's `root_out` ([num_rows, width], x's dtype, contiguous rows), x's first
// num_rows rows are copied into it in the same pass (GraphSAGE's root term beside its mean,
// in one table); the copy runs while the row's scattered sources are awaited. With
// csr_sum_into's `index` (int64 [num_sources], each in [0, x.size(0))), the sources are x's
// rows index[0..] (col points into index): x is a whole feature table and the product reads a
// batch's rows where they lie, instead of after a gather that copies them. With its `relu`,
// the sources (and the root rows copied) are max(x, 0) as read (NaN stays NaN, as torch's relu
// keeps it): x is the previous layer's output before its ReLU, which then takes no pass of its
// own.
//
// input_gradient is a layer's backward through its aggregation, over the transposed
// adjacency: the sum of `grad`'s rows, plus `root_grad` ([<= num_rows, width], grad's dtype,
// contiguous rows: the root term's gradient) on the first rows, zeroed where `relu_input`
// ([num_rows, width], grad's dtype, contiguous rows: what the ReLU that gave the layer its
// input was given) is <= 0 (that ReLU's backward; NaN keeps its gradient), each row rounded
// once from float32; and the result's column sums [width] (the previous layer's bias
// gradient), added in fixed blocks of rows so that they do not depend on the thread count
// (with `column_sums`; else an empty [0]).
#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <optional>
#include <tuple>
#include <type_traits>
#include <vector>

#include "buffer_pool.h"
#include "row_loop.h"

namespace graphengine {
namespace {

// How far ahead a row's sources are prefetched: far enough to cover a scattered row's memory
// latency on a batch's first layer, where bfloat16 rows gain the most; twice as far gains
// nothing and four times as far is slower (docs/benchmarks-archive.md, issue 15).
constexpr int64_t kPrefetchEdges = 8;
constexpr int64_t kCacheLine = 64;
constexpr int64_t kRowBlock = 64;  // rows per parallel task (and per partial column sum)

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

// acc += w * max(x, 0), x float.
GRAPHENGINE_ROW_LOOP void add_scaled_relu(float w, const float* x, float* acc, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    acc[i] += w * relu_value(x[i]);
  }
}

// acc += w * max(x, 0), x bfloat16.
GRAPHENGINE_ROW_LOOP void add_scaled_relu(float w, const uint16_t* x, float* acc, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    acc[i] += w * relu_value(bfloat16_to_float(x[i]));
  }
}

// out = max(x, 0), x and out float.
GRAPHENGINE_ROW_LOOP void copy_relu(const float* x, float* out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    out[i] = relu_value(x[i]);
  }
}

// out = max(x, 0), x and out bfloat16 (exact: each value is kept or zeroed).
GRAPHENGINE_ROW_LOOP void copy_relu(const uint16_t* x, uint16_t* out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    out[i] = bfloat16_to_float(x[i]) <= 0.0f ? static_cast<uint16_t>(0) : x[i];
  }
}

// out = acc rounded to bfloat16 (to nearest even; NaN stays NaN), as c10::BFloat16 rounds.
GRAPHENGINE_ROW_LOOP void store_bfloat16(const float* acc, uint16_t* out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    out[i] = float_to_bfloat16(acc[i]);
  }
}

// acc += w * x, or w * max(x, 0) with kRelu.
template <bool kRelu, typename scalar_t>
void add_scaled_row(float w, const scalar_t* x, float* acc, int64_t n) {
  if constexpr (std::is_same_v<scalar_t, float> || std::is_same_v<scalar_t, at::BFloat16>) {
    const auto* bits = reinterpret_cast<const row_bits_t<scalar_t>*>(x);
    if constexpr (kRelu) {
      add_scaled_relu(w, bits, acc, n);
    } else {
      add_scaled(w, bits, acc, n);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      const float value = static_cast<float>(x[i]);
      acc[i] += w * (kRelu ? relu_value(value) : value);
    }
  }
}

// out = x, or max(x, 0) with kRelu.
template <bool kRelu, typename scalar_t>
void copy_row(const scalar_t* x, scalar_t* out, int64_t n) {
  if constexpr (!kRelu) {
    std::memcpy(out, x, n * sizeof(scalar_t));
  } else if constexpr (std::is_same_v<scalar_t, float> || std::is_same_v<scalar_t, at::BFloat16>) {
    using bits_t = row_bits_t<scalar_t>;
    copy_relu(reinterpret_cast<const bits_t*>(x), reinterpret_cast<bits_t*>(out), n);
  } else {
    for (int64_t i = 0; i < n; ++i) {
      out[i] = static_cast<float>(x[i]) <= 0.0f ? scalar_t(0.0f) : x[i];
    }
  }
}

// Into L2 (locality 2), as the gather prefetches (gather_kernel.cpp): more scattered rows in
// flight than the L1's miss buffers allow, which speeds up the first layer's mean over a
// gathered batch.
void prefetch_row(const void* row, int64_t bytes) {
  const char* p = static_cast<const char*>(row);
  for (int64_t offset = 0; offset < bytes; offset += kCacheLine) {
    __builtin_prefetch(p + offset, 0, 2);
  }
}

// Every entry of `ids` (int64) lies in [0, bound): checked in parallel, the first bad one
// reported.
void check_ids(const at::Tensor& ids, int64_t bound, const char* op, const char* name) {
  const int64_t* id = ids.data_ptr<int64_t>();
  const int64_t count = ids.numel();
  std::atomic<bool> bad{false};
  at::parallel_for(0, count, 16384, [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      if (id[k] < 0 || id[k] >= bound) {
        bad = true;
        return;
      }
    }
  });
  for (int64_t k = 0; bad && k < count; ++k) {
    TORCH_CHECK_INDEX(id[k] >= 0 && id[k] < bound, op, ": '", name, "' holds ", id[k],
                      " at position ", k, ", outside [0, ", bound, ")");
  }
}

// rowptr runs from 0 to col's length without decreasing, and col lies in [0, num_cols).
void check_entries(const at::Tensor& rowptr, const at::Tensor& col, int64_t num_cols,
                   const char* op) {
  TORCH_CHECK(rowptr.scalar_type() == at::kLong && col.scalar_type() == at::kLong &&
                  rowptr.dim() == 1 && col.dim() == 1 && rowptr.is_contiguous() &&
                  col.is_contiguous() && rowptr.numel() >= 1,
              op, ": 'rowptr' and 'col' must be contiguous 1-D int64 tensors (got ",
              rowptr.scalar_type(), " ", rowptr.sizes(), " and ", col.scalar_type(), " ",
              col.sizes(), ")");
  TORCH_CHECK(rowptr.device().is_cpu() && col.device().is_cpu(), op,
              " (CPU): 'rowptr' and 'col' must be CPU tensors");
  const int64_t num_rows = rowptr.numel() - 1, num_edges = col.numel();
  const int64_t* ptr = rowptr.data_ptr<int64_t>();
  TORCH_CHECK(ptr[0] == 0 && ptr[num_rows] == num_edges, op, ": 'rowptr' must run from 0 to ",
              num_edges, " (got ", ptr[0], " to ", ptr[num_rows], ")");
  // Checked in parallel, reported serially for the first decrease. Nondecreasing from 0 to
  // num_edges, every row's edges lie in col.
  std::atomic<bool> decreases{false};
  at::parallel_for(0, num_rows, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      if (ptr[i] > ptr[i + 1]) {
        decreases = true;
        return;
      }
    }
  });
  for (int64_t i = 0; decreases && i < num_rows; ++i) {
    TORCH_CHECK(ptr[i] <= ptr[i + 1], op, ": 'rowptr' decreases at ", i, " (", ptr[i], " to ",
                ptr[i + 1], ")");
  }
  check_ids(col, num_cols, op, "col");
}

void check_value(const std::optional<at::Tensor>& value, int64_t num_edges, const char* op) {
  if (value.has_value()) {
    TORCH_CHECK(value->scalar_type() == at::kFloat && value->dim() == 1 &&
                    value->numel() == num_edges && value->is_contiguous() &&
                    value->device().is_cpu(),
                op, ": 'value' must be a contiguous float32 CPU [", num_edges,
                "] tensor (got ", value->scalar_type(), " ", value->sizes(), ")");
  }
}

void check_csr(const at::Tensor& rowptr, const at::Tensor& col,
               const std::optional<at::Tensor>& value, const at::Tensor& x, int64_t num_sources,
               const char* op, const char* x_name) {
  TORCH_CHECK(x.dim() == 2 && (x.size(1) <= 1 || x.stride(1) == 1),
              op, ": '", x_name, "' must be 2-D with contiguous rows (got sizes ", x.sizes(),
              ", strides ", x.strides(), ")");
  TORCH_CHECK(x.device().is_cpu(), op, " (CPU): '", x_name, "' must be a CPU tensor");
  TORCH_CHECK(is_row_loop_type(x.scalar_type()),
              op, ": '", x_name, "' must be float32, bfloat16 or float16 (got ", x.scalar_type(),
              ")");
  check_entries(rowptr, col, num_sources, op);
  check_value(value, col.numel(), op);
}

// A table beside the product: [rows, x's width] (rows at most num_rows, exactly num_rows
// when `exact`) of x's dtype on the CPU, rows contiguous.
void check_rows(const at::Tensor& table, const at::Tensor& x, int64_t num_rows, bool exact,
                const char* op, const char* name) {
  const int64_t width = x.size(1);
  TORCH_CHECK(table.scalar_type() == x.scalar_type() && table.device().is_cpu() &&
                  table.dim() == 2 && table.size(1) == width &&
                  (exact ? table.size(0) == num_rows : table.size(0) <= num_rows) &&
                  (width <= 1 || table.stride(1) == 1),
              op, ": '", name, "' must be a CPU ", x.scalar_type(), " [", exact ? "" : "<= ",
              num_rows, ", ", width, "] tensor with contiguous rows (got ", table.scalar_type(),
              " ", table.sizes(), ", strides ", table.strides(), ")");
}

// A given output: a table of exactly num_rows rows, not overlapping itself or x.
void check_output(const at::Tensor& out, const at::Tensor& x, int64_t num_rows,
                  const char* name) {
  check_rows(out, x, num_rows, true, "csr_sum_into", name);
  at::assert_no_internal_overlap(out);
  at::assert_no_overlap(out, x);
}

// acc = 0 where the ReLU's input z <= 0 (it output 0 there): its backward. z float.
GRAPHENGINE_ROW_LOOP void relu_backward_row(const float* z, float* acc, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    acc[i] = z[i] <= 0.0f ? 0.0f : acc[i];
  }
}

// The same, z bfloat16.
GRAPHENGINE_ROW_LOOP void relu_backward_row(const uint16_t* z, float* acc, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    acc[i] = bfloat16_to_float(z[i]) <= 0.0f ? 0.0f : acc[i];
  }
}

template <typename scalar_t>
void relu_backward_row(const scalar_t* z, float* acc, int64_t n) {
  if constexpr (std::is_same_v<scalar_t, float> || std::is_same_v<scalar_t, at::BFloat16>) {
    relu_backward_row(reinterpret_cast<const row_bits_t<scalar_t>*>(z), acc, n);
  } else {
    for (int64_t i = 0; i < n; ++i) {
      acc[i] = static_cast<float>(z[i]) <= 0.0f ? 0.0f : acc[i];
    }
  }
}

// Rows of a table beside the product (row i at data + i * stride), or none.
template <typename T>
struct Rows {
  T* data = nullptr;
  int64_t stride = 0;
  int64_t count = 0;
};

// What a row gets after its sum: `add`'s row added (rows below add.count), zeroed where
// `relu_input` is <= 0, x's own row copied into `root_out`, and the result added to its row
// block's column sums (`block_sums`, [blocks of kRowBlock rows, width] float32).
template <typename scalar_t>
struct Epilogue {
  Rows<const scalar_t> add;
  Rows<const scalar_t> relu_input;
  Rows<scalar_t> root_out;
  float* block_sums = nullptr;
};

// acc += x, both float.
GRAPHENGINE_ROW_LOOP void add_row(const float* x, float* acc, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    acc[i] += x[i];
  }
}

// With kRelu, the sources (and root rows) are max(x, 0) as read.
template <bool kRelu, typename scalar_t>
void csr_sum_kernel(const int64_t* rowptr, const int64_t* col, const float* value,
                    const scalar_t* x, int64_t x_stride, const int64_t* index, int64_t num_rows,
                    int64_t width, scalar_t* out, int64_t out_stride,
                    const Epilogue<scalar_t>& epilogue) {
  const int64_t row_bytes = width * static_cast<int64_t>(sizeof(scalar_t));
  // Source c's row: x's row c, or row index[c] when the sources are rows of a larger table.
  const auto source_row = [&](int64_t c) {
    return x + (index == nullptr ? c : index[c]) * x_stride;
  };
  const int64_t num_blocks = (num_rows + kRowBlock - 1) / kRowBlock;
  // Fixed blocks of rows, so that the column sums do not depend on the thread count.
  at::parallel_for(0, num_blocks, 1, [&](int64_t first_block, int64_t end_block) {
    const int64_t begin = first_block * kRowBlock;
    const int64_t end = std::min(num_rows, end_block * kRowBlock);
    std::vector<float> buffer(std::is_same_v<scalar_t, float> ? 0 : width);
    // The chunk's edges are contiguous: prefetch by edge, across its rows.
    const int64_t edges_end = rowptr[end];
    for (int64_t e = rowptr[begin]; e < std::min(rowptr[begin] + kPrefetchEdges, edges_end); ++e) {
      prefetch_row(source_row(col[e]), row_bytes);
    }
    for (int64_t i = begin; i < end; ++i) {
      float* acc = std::is_same_v<scalar_t, float>
                       ? reinterpret_cast<float*>(out + i * out_stride)
                       : buffer.data();
      std::fill(acc, acc + width, 0.0f);
      for (int64_t e = rowptr[i]; e < rowptr[i + 1]; ++e) {
        if (e + kPrefetchEdges < edges_end) {
          prefetch_row(source_row(col[e + kPrefetchEdges]), row_bytes);
        }
        add_scaled_row<kRelu>(value == nullptr ? 1.0f : value[e], source_row(col[e]), acc,
                              width);
      }
      if (i < epilogue.add.count) {
        add_scaled_row<false>(1.0f, epilogue.add.data + i * epilogue.add.stride, acc, width);
      }
      if (epilogue.relu_input.data != nullptr) {
        relu_backward_row(epilogue.relu_input.data + i * epilogue.relu_input.stride, acc, width);
      }
      if (epilogue.block_sums != nullptr) {
        add_row(acc, epilogue.block_sums + (i / kRowBlock) * width, width);
      }
      if constexpr (std::is_same_v<scalar_t, at::BFloat16>) {
        store_bfloat16(acc, reinterpret_cast<uint16_t*>(out + i * out_stride), width);
      } else if constexpr (!std::is_same_v<scalar_t, float>) {
        scalar_t* row = out + i * out_stride;
        for (int64_t k = 0; k < width; ++k) {
          row[k] = static_cast<scalar_t>(acc[k]);
        }
      }
      if (epilogue.root_out.data != nullptr) {
        copy_row<kRelu>(source_row(i), epilogue.root_out.data + i * epilogue.root_out.stride,
                        width);
      }
    }
  });
}

// Writes adjacency @ x, then the epilogue's steps, into `out` (all checked by the caller).
void run_csr_sum(const at::Tensor& rowptr, const at::Tensor& col,
                 const std::optional<at::Tensor>& value, const at::Tensor& x,
                 const at::Tensor& out, const std::optional<at::Tensor>& add,
                 const std::optional<at::Tensor>& relu_input,
                 const std::optional<at::Tensor>& root_out, float* block_sums,
                 const std::optional<at::Tensor>& index, bool relu) {
  const int64_t num_rows = rowptr.numel() - 1, width = x.size(1);
  if (num_rows == 0 || width == 0) {
    return;
  }
  const int64_t* ptr = rowptr.data_ptr<int64_t>();
  const int64_t* source = col.data_ptr<int64_t>();
  const float* weight = value.has_value() ? value->data_ptr<float>() : nullptr;
  const int64_t stride = x.size(0) > 0 ? x.stride(0) : width;
  const auto run = [&](auto type_tag) {
    using scalar_t = decltype(type_tag);
    Epilogue<scalar_t> epilogue;
    if (add.has_value()) {
      epilogue.add = {add->data_ptr<scalar_t>(), add->stride(0), add->size(0)};
    }
    if (relu_input.has_value()) {
      epilogue.relu_input = {relu_input->data_ptr<scalar_t>(), relu_input->stride(0), num_rows};
    }
    if (root_out.has_value()) {
      epilogue.root_out = {root_out->data_ptr<scalar_t>(), root_out->stride(0), num_rows};
    }
    epilogue.block_sums = block_sums;
    auto kernel = relu ? csr_sum_kernel<true, scalar_t> : csr_sum_kernel<false, scalar_t>;
    kernel(ptr, source, weight, x.data_ptr<scalar_t>(), stride,
           index.has_value() ? index->data_ptr<int64_t>() : nullptr, num_rows, width,
           out.data_ptr<scalar_t>(), out.stride(0), epilogue);
  };
  dispatch_row_loop_type(x.scalar_type(), run);  // check_csr allowed it
}

at::Tensor csr_sum_cpu(const at::Tensor& rowptr, const at::Tensor& col,
                       const std::optional<at::Tensor>& value, const at::Tensor& x) {
  check_csr(rowptr, col, value, x, x.size(0), "csr_sum", "x");
  at::Tensor out = pooled_empty({rowptr.numel() - 1, x.size(1)}, x.options());
  run_csr_sum(rowptr, col, value, x, out, std::nullopt, std::nullopt, std::nullopt, nullptr,
              std::nullopt, false);
  return out;
}

std::tuple<at::Tensor, at::Tensor> input_gradient_cpu(const at::Tensor& rowptr,
                                                      const at::Tensor& col,
                                                      const std::optional<at::Tensor>& value,
                                                      const at::Tensor& grad,
                                                      const std::optional<at::Tensor>& root_grad,
                                                      const std::optional<at::Tensor>& relu_input,
                                                      bool column_sums) {
  check_csr(rowptr, col, value, grad, grad.size(0), "input_gradient", "grad");
  const int64_t num_rows = rowptr.numel() - 1, width = grad.size(1);
  if (root_grad.has_value()) {
    check_rows(*root_grad, grad, num_rows, false, "input_gradient", "root_grad");
  }
  if (relu_input.has_value()) {
    check_rows(*relu_input, grad, num_rows, true, "input_gradient", "relu_input");
  }
  at::Tensor out = pooled_empty({num_rows, width}, grad.options());
  if (!column_sums) {
    run_csr_sum(rowptr, col, value, grad, out, root_grad, relu_input, std::nullopt, nullptr,
                std::nullopt, false);
    return {out, at::empty({0}, grad.options())};
  }
  const int64_t num_blocks = (num_rows + kRowBlock - 1) / kRowBlock;
  at::Tensor block_sums = at::zeros({num_blocks, width}, grad.options().dtype(at::kFloat));
  run_csr_sum(rowptr, col, value, grad, out, root_grad, relu_input, std::nullopt,
              block_sums.data_ptr<float>(), std::nullopt, false);
  return {out, sum_row_blocks(block_sums).to(grad.scalar_type())};
}

void csr_sum_into_cpu(const at::Tensor& rowptr, const at::Tensor& col,
                      const std::optional<at::Tensor>& value, const at::Tensor& x,
                      const at::Tensor& out, const std::optional<at::Tensor>& root_out,
                      const std::optional<at::Tensor>& index, bool relu) {
  // With `index`, the sources are x's rows index[0..], which the entries of col point into.
  const int64_t num_sources = index.has_value() ? index->numel() : x.size(0);
  if (index.has_value()) {
    TORCH_CHECK(index->scalar_type() == at::kLong && index->dim() == 1 &&
                    index->is_contiguous() && index->device().is_cpu(),
                "csr_sum_into: 'index' must be a contiguous 1-D int64 CPU tensor (got ",
                index->scalar_type(), " ", index->sizes(), ")");
    check_ids(*index, x.size(0), "csr_sum_into", "index");
  }
  check_csr(rowptr, col, value, x, num_sources, "csr_sum_into", "x");
  const int64_t num_rows = rowptr.numel() - 1;
  check_output(out, x, num_rows, "out");
  if (root_out.has_value()) {
    TORCH_CHECK(num_sources >= num_rows, "csr_sum_into: 'root_out' needs at least ", num_rows,
                " sources (got ", num_sources, ")");
    check_output(*root_out, x, num_rows, "root_out");
    at::assert_no_overlap(*root_out, out);
  }
  run_csr_sum(rowptr, col, value, x, out, std::nullopt, std::nullopt, root_out, nullptr, index,
              relu);
}

// The transpose [num_cols, num_rows]: the entries grouped by column, in row order within one
// (a counting sort, serial: one pass to count, one to place). Returns its rowptr
// [num_cols + 1], its col (the rows) [num_edges] and its value [num_edges] (float32; ones when
// `value` is none).
std::tuple<at::Tensor, at::Tensor, at::Tensor> csr_transpose_cpu(
    const at::Tensor& rowptr, const at::Tensor& col, const std::optional<at::Tensor>& value,
    int64_t num_cols) {
  TORCH_CHECK(num_cols >= 0, "csr_transpose: 'num_cols' must be >= 0 (got ", num_cols, ")");
  check_entries(rowptr, col, num_cols, "csr_transpose");
  check_value(value, col.numel(), "csr_transpose");
  const int64_t num_rows = rowptr.numel() - 1, num_edges = col.numel();
  at::Tensor rowptr_t = at::zeros({num_cols + 1}, rowptr.options());
  at::Tensor row_t = at::empty({num_edges}, col.options());
  at::Tensor value_t = at::empty({num_edges}, col.options().dtype(at::kFloat));
  const int64_t* ptr = rowptr.data_ptr<int64_t>();
  const int64_t* source = col.data_ptr<int64_t>();
  const float* weight = value.has_value() ? value->data_ptr<float>() : nullptr;
  int64_t* start = rowptr_t.data_ptr<int64_t>();
  for (int64_t e = 0; e < num_edges; ++e) {
    ++start[source[e] + 1];
  }
  for (int64_t c = 0; c < num_cols; ++c) {
    start[c + 1] += start[c];
  }
  std::vector<int64_t> cursor(start, start + num_cols);
  int64_t* row_out = row_t.data_ptr<int64_t>();
  float* value_out = value_t.data_ptr<float>();
  for (int64_t i = 0; i < num_rows; ++i) {
    for (int64_t e = ptr[i]; e < ptr[i + 1]; ++e) {
      const int64_t slot = cursor[source[e]]++;
      row_out[slot] = i;
      value_out[slot] = weight == nullptr ? 1.0f : weight[e];
    }
  }
  return {rowptr_t, row_t, value_t};
}

}  // namespace

TORCH_LIBRARY_IMPL(graphengine, CPU, m) {
  m.impl("csr_sum", &csr_sum_cpu);
  m.impl("csr_sum_into", &csr_sum_into_cpu);
  m.impl("input_gradient", &input_gradient_cpu);
  m.impl("csr_transpose", &csr_transpose_cpu);
}

}  // namespace graphengine
