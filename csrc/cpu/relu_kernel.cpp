// ReLU after a linear layer, forward and backward, each in one pass over a [rows, channels]
// tensor (a GraphSAGE batch's first layer: [109k, 256]), where torch takes two.
//
// bias_relu_: out = max(out + bias, 0) in place (NaN stays NaN, as torch's relu keeps it), after
// a product without bias (torch's addmm with a bias first broadcasts the bias into its output,
// a pass, and then accumulates the product into it), or after one that added it (no bias
// here).
//
// relu_backward_sum: grad_in = 0 where out <= 0, else grad (as torch's threshold_backward, NaN
// outputs keep their gradient), and its column sums (the gradient of a bias added before the
// ReLU). torch runs these as two passes (threshold_backward, then a sum over rows). The column
// sums add fixed blocks of rows in float32, then the blocks in order, so they do not depend on
// the thread count.
//
// Shapes: out, grad [rows, channels], contiguous, one of float, bfloat16 or half; bias
// [channels], out's dtype. relu_backward_sum returns grad_in (grad's dtype) and the sums
// [channels] (grad's dtype).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <tuple>
#include <type_traits>

#include "buffer_pool.h"
#include "row_loop.h"

namespace graphengine {
namespace {

constexpr int64_t kRowBlock = 512;  // rows per partial column sum

GRAPHENGINE_ROW_LOOP void bias_relu_row(float* out, const float* bias, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float value = out[i] + bias[i];
    out[i] = relu_value(value);
  }
}

// bfloat16: the sum rounded to nearest even, as c10::BFloat16 rounds (NaN stays NaN).
GRAPHENGINE_ROW_LOOP void bias_relu_row(uint16_t* out, const float* bias, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float value = bfloat16_to_float(out[i]) + bias[i];
    out[i] = float_to_bfloat16(relu_value(value));
  }
}

void bias_relu_row(at::Half* out, const float* bias, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float value = static_cast<float>(out[i]) + bias[i];
    out[i] = at::Half(relu_value(value));
  }
}

template <typename scalar_t>
void bias_relu_kernel(at::Tensor& out, const float* bias) {
  using bits_t = row_bits_t<scalar_t>;
  const int64_t rows = out.size(0), channels = out.size(1);
  auto* data = reinterpret_cast<bits_t*>(out.data_ptr<scalar_t>());
  at::parallel_for(0, rows, 256, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      bias_relu_row(data + r * channels, bias, channels);
    }
  });
}

void bias_relu_cpu(at::Tensor& out, const std::optional<at::Tensor>& bias) {
  TORCH_CHECK(out.dim() == 2 && out.is_contiguous() && is_row_loop_type(out.scalar_type()) &&
                  out.device().is_cpu(),
              "bias_relu_: 'out' must be a contiguous 2-D float32, bfloat16 or float16 CPU "
              "tensor (got ",
              out.scalar_type(), " ", out.sizes(), ")");
  const int64_t channels = out.size(1);
  if (bias.has_value()) {
    TORCH_CHECK(bias->dim() == 1 && bias->size(0) == channels &&
                    bias->scalar_type() == out.scalar_type() && bias->device().is_cpu(),
                "bias_relu_: 'bias' must be a CPU ", out.scalar_type(), " [", channels,
                "] tensor (got ", bias->scalar_type(), " ", bias->sizes(), ")");
  }
  const at::Tensor bias_float =
      bias.has_value() ? bias->to(at::kFloat).contiguous()
                       : at::zeros({channels}, out.options().dtype(at::kFloat));
  const float* b = bias_float.data_ptr<float>();
  dispatch_row_loop_type(out.scalar_type(), [&](auto type_tag) {
    bias_relu_kernel<decltype(type_tag)>(out, b);
  });
}

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

template <typename scalar_t>
void relu_grad_kernel(const at::Tensor& grad, const at::Tensor& out, at::Tensor& grad_in,
                      at::Tensor& partial) {
  using bits_t = row_bits_t<scalar_t>;
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
  TORCH_CHECK(grad.scalar_type() == out.scalar_type() && is_row_loop_type(grad.scalar_type()),
              "relu_backward_sum: 'grad' and 'out' must both be float32, bfloat16 or float16 "
              "(got ",
              grad.scalar_type(), " and ", out.scalar_type(), ")");
  TORCH_CHECK(grad.device().is_cpu() && out.device().is_cpu(),
              "relu_backward_sum (CPU): 'grad' and 'out' must be CPU tensors");
  const int64_t rows = grad.size(0), channels = grad.size(1);
  at::Tensor grad_in = pooled_empty({rows, channels}, grad.options());
  const int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
  at::Tensor partial = at::empty({blocks, channels}, grad.options().dtype(at::kFloat));
  dispatch_row_loop_type(grad.scalar_type(), [&](auto type_tag) {
    relu_grad_kernel<decltype(type_tag)>(grad, out, grad_in, partial);
  });
  return {grad_in, sum_row_blocks(partial).to(grad.scalar_type())};
}

}  // namespace

TORCH_LIBRARY_IMPL(graphengine, CPU, m) {
  m.impl("bias_relu_", &bias_relu_cpu);
  m.impl("relu_backward_sum", &relu_backward_sum_cpu);
}

}  // namespace graphengine
