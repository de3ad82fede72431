// transpose_into: out = src.t(), for a block of a layer's input rows ([rows, channels], rows
// contiguous, any row stride) into a contiguous [channels, rows] buffer.
//
// The fused layers' weights' gradient grad.t() @ x runs on oneDNN's inner product as
// x.t() @ grad, a block of rows at a time; oneDNN wants x.t() with its rows contiguous. torch's
// strided copy writes one element per cache line touched; this kernel moves whole tiles, so a
// block of rows already in the cache transposes at a small fraction of the product's cost.
// float32 on x86 goes through AVX registers 16
// rows by 8 columns at a time (each of out's rows gets 64 contiguous bytes), requesting the
// rows 32 ahead from memory; the edges, other dtypes and other CPUs copy square tiles.
//
// Shapes: src [rows, channels] with stride(1) == 1, out [channels, rows] contiguous, both one of
// float32, bfloat16 or float16 (the same), on the CPU. The values are copied unchanged (bfloat16
// as its bits, as row_loop.h reads it).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "row_loop.h"

namespace graphengine {
namespace {

constexpr int64_t kTile = 32;  // the scalar path's square tiles, kept in the L1 cache

// Scalar: out[c * out_stride + r] = src[r * src_stride + c] for r < rows, c < cols, a tile
// at a time.
template <typename bits_t>
void transpose_block(const bits_t* src, int64_t src_stride, bits_t* out, int64_t out_stride,
                     int64_t rows, int64_t cols) {
  for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
    const int64_t r1 = std::min(rows, r0 + kTile);
    for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
      const int64_t c1 = std::min(cols, c0 + kTile);
      for (int64_t c = c0; c < c1; ++c) {
        for (int64_t r = r0; r < r1; ++r) {
          out[c * out_stride + r] = src[r * src_stride + c];
        }
      }
    }
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
#define GRAPHENGINE_TRANSPOSE_AVX 1

// An 8x8 float tile in registers: rows[i] <- column i of the 8 rows read.
__attribute__((target("avx"))) inline void transpose_8x8(__m256 rows[8]) {
  __m256 low[4], high[4];
  for (int i = 0; i < 4; ++i) {
    low[i] = _mm256_unpacklo_ps(rows[2 * i], rows[2 * i + 1]);
    high[i] = _mm256_unpackhi_ps(rows[2 * i], rows[2 * i + 1]);
  }
  __m256 quad[8];
  for (int i = 0; i < 2; ++i) {
    quad[4 * i + 0] = _mm256_shuffle_ps(low[2 * i], low[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0));
    quad[4 * i + 1] = _mm256_shuffle_ps(low[2 * i], low[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2));
    quad[4 * i + 2] = _mm256_shuffle_ps(high[2 * i], high[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0));
    quad[4 * i + 3] = _mm256_shuffle_ps(high[2 * i], high[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; ++i) {
    rows[i] = _mm256_permute2f128_ps(quad[i], quad[4 + i], 0x20);
    rows[4 + i] = _mm256_permute2f128_ps(quad[i], quad[4 + i], 0x31);
  }
}

constexpr int64_t kPrefetchRows = 32;  // how far ahead the AVX path requests rows

// float32 rows [r0, r0 + rows) of src into out, 16 rows by 8 columns at a time, the edges
// scalar.
__attribute__((target("avx"))) void transpose_rows_avx(const float* src, int64_t src_stride,
                                                       float* out, int64_t out_stride,
                                                       int64_t r0, int64_t rows, int64_t cols) {
  const int64_t full_cols = cols - cols % 8;
  int64_t r = r0;
  for (; r + 16 <= r0 + rows; r += 16) {
    // The rows kPrefetchRows ahead, a column block at a time, requested from memory now.
    const bool prefetches = r + kPrefetchRows + 16 <= r0 + rows;
    for (int64_t c = 0; c < full_cols; c += 8) {
      if (prefetches) {
        for (int i = 0; i < 16; ++i) {
          const float* ahead = src + (r + kPrefetchRows + i) * src_stride + c;
          _mm_prefetch(reinterpret_cast<const char*>(ahead), _MM_HINT_T0);
        }
      }
      __m256 upper[8], lower[8];
      for (int i = 0; i < 8; ++i) {
        upper[i] = _mm256_loadu_ps(src + (r + i) * src_stride + c);
        lower[i] = _mm256_loadu_ps(src + (r + 8 + i) * src_stride + c);
      }
      transpose_8x8(upper);
      transpose_8x8(lower);
      for (int i = 0; i < 8; ++i) {
        _mm256_storeu_ps(out + (c + i) * out_stride + r, upper[i]);
        _mm256_storeu_ps(out + (c + i) * out_stride + r + 8, lower[i]);
      }
    }
    transpose_block(src + r * src_stride + full_cols, src_stride, out + full_cols * out_stride + r,
                    out_stride, 16, cols - full_cols);
  }
  transpose_block(src + r * src_stride, src_stride, out + r, out_stride, r0 + rows - r, cols);
}
#endif

constexpr int64_t kRowGrain = 256;  // rows a thread takes at least

template <typename bits_t>
void transpose_kernel(const bits_t* src, int64_t src_stride, bits_t* out, int64_t rows,
                      int64_t channels) {
  at::parallel_for(0, rows, kRowGrain, [&](int64_t begin, int64_t end) {
#ifdef GRAPHENGINE_TRANSPOSE_AVX
    if constexpr (sizeof(bits_t) == 4) {
      if (__builtin_cpu_supports("avx")) {
        transpose_rows_avx(reinterpret_cast<const float*>(src), src_stride,
                           reinterpret_cast<float*>(out), rows, begin, end - begin, channels);
        return;
      }
    }
#endif
    transpose_block(src + begin * src_stride, src_stride, out + begin, rows, end - begin,
                    channels);
  });
}

void transpose_into_cpu(const at::Tensor& src, at::Tensor& out) {
  TORCH_CHECK(src.dim() == 2 && src.device().is_cpu() && is_row_loop_type(src.scalar_type()) &&
                  (src.stride(1) == 1 || src.size(1) <= 1),
              "transpose_into: 'src' must be a 2-D float32, bfloat16 or float16 CPU tensor with "
              "contiguous rows (got ",
              src.scalar_type(), " ", src.sizes(), " strides ", src.strides(), ")");
  const int64_t rows = src.size(0), channels = src.size(1);
  TORCH_CHECK(out.dim() == 2 && out.size(0) == channels && out.size(1) == rows &&
                  out.is_contiguous() && out.scalar_type() == src.scalar_type() &&
                  out.device().is_cpu(),
              "transpose_into: 'out' must be a contiguous ", src.scalar_type(), " [", channels,
              ", ", rows, "] CPU tensor (got ", out.scalar_type(), " ", out.sizes(),
              out.is_contiguous() ? "" : ", not contiguous", ")");
  if (rows == 0 || channels == 0) {
    return;
  }
  const int64_t src_stride = rows > 1 ? src.stride(0) : channels;
  dispatch_row_loop_type(src.scalar_type(), [&](auto type_tag) {
    using scalar_t = decltype(type_tag);
    using bits_t = row_bits_t<scalar_t>;
    transpose_kernel(reinterpret_cast<const bits_t*>(src.const_data_ptr<scalar_t>()), src_stride,
                     reinterpret_cast<bits_t*>(out.data_ptr<scalar_t>()), rows, channels);
  });
}

}  // namespace
}  // namespace graphengine

TORCH_LIBRARY_IMPL(graphengine, CPU, m) {
  m.impl("transpose_into", &graphengine::transpose_into_cpu);
}
