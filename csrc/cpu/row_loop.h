// What the CPU kernels' row loops share: builds for AVX-512 and AVX2 chosen at load time, and
// bfloat16 read as the upper half of a float's bits (so that the loops vectorize).
#pragma once

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

}  // namespace graphengine
