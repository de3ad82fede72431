// ReLU's backward and the bias gradient in one pass: grad_in = 0 where out <= 0, else grad (as
// torch's threshold_backward, NaN outputs keep their gradient), and
// its column sums (the gradient of a bias added before the ReLU). torch runs these as two
// passes over a [rows, channels] tensor (threshold_backward, then sum over rows), which on a
// GraphSAGE batch's first layer ([109k, 256]) each take several milliseconds.
//
// The column sums add fixed blocks of rows in float32, then the blocks in order, so they do
// not depend on the thread count. Shapes: grad and out [rows, channels], contiguous, one of
// float, bfloat16 or half; returns grad_in (their dtype) and the sums [channels] (their dtype).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <type_traits>

#include "buffer_pool.h"
#include "row_loop.h"

namespace graphengine {
namespace {

constexpr int64_t kRowBlock = 512;  // rows per partial column sum

GRAPHENGINE_ROW_LOOP void mask_row(const float* grad, const float* out, float* grad_in,
                                   float* sum, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float value = out[i] <= 0.0f ? 0.0f : grad[i];
    grad_in[i] = value;
    sum[i] += value;
  }
}

// bfloat16: the bits of a float's upper half; masking keeps values exact.
GRAPHENGINE_ROW_LOOP void mask_row(const uint16_t* grad, const uint16_t* out, uint16_t* grad_in,
                                   float* sum, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t kept = bfloat16_to_float(out[i]) <= 0.0f ? static_cast<uint16_t>(0) : grad[i];
    grad_in[i] = kept;
    sum[i] += bfloat16_to_float(kept);
  }
}

void mask_row(const at::Half* grad, const at::Half* out, at::Half* grad_in, float* sum,
              int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const at::Half value = static_cast<float>(out[i]) <= 0.0f ? at::Half(0.0f) : grad[i];
    grad_in[i] = value;
    sum[i] += static_cast<float>(value);
  }
}

template <typename scalar_t, typename bits_t>
void relu_grad_kernel(const at::Tensor& grad, const at::Tensor& out, at::Tensor& grad_in,
                      at::Tensor& partial) {
  const int64_t rows = grad.size(0), channels = grad.size(1);
  const auto* g = reinterpret_cast<const bits_t*>(grad.data_ptr<scalar_t>());
  const auto* o = reinterpret_cast<const bits_t*>(out.data_ptr<scalar_t>());
  auto* gi = reinterpret_cast<bits_t*>(grad_in.data_ptr<scalar_t>());
  float* sums = partial.data_ptr<float>();
  at::parallel_for(0, partial.size(0), 1, [&](int64_t begin, int64_t end) {
    for (int64_t block = begin; block < end; ++block) {
      float* sum = sums + block * channels;
      std::fill(sum, sum + channels, 0.0f);
      const int64_t last = std::min(rows, (block + 1) * kRowBlock);
      for (int64_t r = block * kRowBlock; r < last; ++r) {
        const int64_t offset = r * channels;
        mask_row(g + offset, o + offset, gi + offset, sum, channels);
      }
    }
  });
}

std::tuple<at::Tensor, at::Tensor> relu_backward_sum_cpu(const at::Tensor& grad,
                                                         const at::Tensor& out) {
  TORCH_CHECK(grad.dim() == 2 && grad.is_contiguous() && out.is_contiguous() &&
                  grad.sizes() == out.sizes(),
              "relu_backward_sum: 'grad' and 'out' must be contiguous 2-D tensors of one shape "
              "(got ",
              grad.sizes(), " and ", out.sizes(), ")");
  TORCH_CHECK(grad.scalar_type() == out.scalar_type() &&
                  (grad.scalar_type() == at::kFloat || grad.scalar_type() == at::kBFloat16 ||
                   grad.scalar_type() == at::kHalf),
              "relu_backward_sum: 'grad' and 'out' must both be float32, bfloat16 or float16 "
              "(got ",
              grad.scalar_type(), " and ", out.scalar_type(), ")");
  TORCH_CHECK(grad.device().is_cpu() && out.device().is_cpu(),
              "relu_backward_sum (CPU): 'grad' and 'out' must be CPU tensors");
  const int64_t rows = grad.size(0), channels = grad.size(1);
  at::Tensor grad_in = pooled_empty({rows, channels}, grad.options());
  const int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
  at::Tensor partial = at::empty({blocks, channels}, grad.options().dtype(at::kFloat));
  switch (grad.scalar_type()) {
    case at::kFloat:
      relu_grad_kernel<float, float>(grad, out, grad_in, partial);
      break;
    case at::kBFloat16:
      relu_grad_kernel<at::BFloat16, uint16_t>(grad, out, grad_in, partial);
      break;
    default:
      relu_grad_kernel<at::Half, at::Half>(grad, out, grad_in, partial);
  }
  at::Tensor sum = at::zeros({channels}, grad.options().dtype(at::kFloat));
  float* total = sum.data_ptr<float>();
  const float* parts = partial.data_ptr<float>();
  for (int64_t block = 0; block < blocks; ++block) {
    for (int64_t c = 0; c < channels; ++c) {
      total[c] += parts[block * channels + c];
    }
  }
  return {grad_in, sum.to(grad.scalar_type())};
}

}  // namespace

TORCH_LIBRARY_IMPL(graphengine, CPU, m) { m.impl("relu_backward_sum", &relu_backward_sum_cpu); }

}  // namespace graphengine
