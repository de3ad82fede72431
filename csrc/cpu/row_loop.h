// What the CPU kernels' row loops share: builds for AVX-512 and AVX2 chosen at load time,
// bfloat16 read as the upper half of a float's bits (so that the loops vectorize), and column
// sums added in a fixed order.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <cstring>

// A function built for AVX-512 and AVX2 as well, chosen at load time by the CPU.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define GRAPHENGINE_ROW_LOOP \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define GRAPHENGINE_ROW_LOOP
#endif

namespace graphengine {

// The float a bfloat16's bits stand for.
inline float bfloat16_to_float(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof value);
  return value;
}

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
