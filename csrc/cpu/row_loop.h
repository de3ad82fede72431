// What the CPU kernels' row loops share: builds for AVX-512 and AVX2 chosen at load time,
// bfloat16 read as the upper half of a float's bits (so that the loops vectorize), and column
// sums added in a fixed order.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

// A function built for AVX-512 and AVX2 as well, chosen at load time by the CPU.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define GRAPHENGINE_ROW_LOOP \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define GRAPHENGINE_ROW_LOOP
#endif

namespace graphengine {

// The ReLU of v: 0 where v <= 0, else v (NaN stays NaN, as torch's relu keeps it).
inline float relu_value(float v) { return v <= 0.0f ? 0.0f : v; }

// The float a bfloat16's bits stand for.
inline float bfloat16_to_float(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof value);
  return value;
}

// The bits of `value` rounded to bfloat16, to nearest even as c10::BFloat16 rounds (NaN stays
// NaN).
inline uint16_t float_to_bfloat16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  return value != value ? static_cast<uint16_t>(0x7fc0u) : static_cast<uint16_t>(rounded);
}

// Whether the row loops take `type`: float32, bfloat16 or float16.
inline bool is_row_loop_type(at::ScalarType type) {
  return type == at::kFloat || type == at::kBFloat16 || type == at::kHalf;
}

// run(scalar_t{}) for the row-loop type `type` (checked by is_row_loop_type).
template <typename Run>
void dispatch_row_loop_type(at::ScalarType type, Run&& run) {
  switch (type) {
    case at::kFloat:
      run(float{});
      break;
    case at::kBFloat16:
      run(at::BFloat16{});
      break;
    default:
      run(at::Half{});
  }
}

// How a row loop reads scalar_t: bfloat16 as its bits (so that the loops vectorize).
template <typename scalar_t>
using row_bits_t = std::conditional_t<std::is_same_v<scalar_t, at::BFloat16>, uint16_t, scalar_t>;

// The column sums [width] of partial sums of fixed row blocks ([blocks, width] float32),
// added in block order, so that they do not depend on how threads split the blocks.
inline at::Tensor sum_row_blocks(const at::Tensor& partial) {
  const int64_t blocks = partial.size(0), width = partial.size(1);
  at::Tensor sum = at::zeros({width}, partial.options());
  float* total = sum.data_ptr<float>();
  const float* parts = partial.data_ptr<float>();
  for (int64_t block = 0; block < blocks; ++block) {
    for (int64_t c = 0; c < width; ++c) {
      total[c] += parts[block * width + c];
    }
  }
  return sum;
}

}  // namespace graphengine
