// Reference quantization into ggml block types, with the arithmetic of ggml's reference
// quantizers (what llama-quantize uses without an importance matrix), so rlx writes the
// same bytes llama.cpp would. K-quant searches live in quantize_k.cpp.
#include <cmath>
#include <cstring>

#include "ir/quant/block_util.h"
#include "ir/quant/quantize_k.h"

#include <algorithm>
#include "rlx/dtype.h"
#include "rlx/error.h"
#include "rlx/quant.h"

namespace rlx::quant {

namespace {

using detail::put_f16;

// ggml type numbers of the formats handled here.
enum : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q2_K = 10, Q3_K = 11, Q4_K = 12,
  Q5_K = 13, Q6_K = 14, IQ4_NL = 20, IQ4_XS = 23, F64 = 28, BF16 = 30,
};

// The value of largest magnitude, keeping its sign (the first one on ties).
inline float signed_absmax(const float* x, int n) {
  float amax = 0, max = 0;
  for (int j = 0; j < n; ++j)
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  return max;
}

void q_q8_0(const float* x, uint8_t* b) {
  float amax = 0;
  for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[j]));
  const float d = amax / ((1 << 7) - 1);
  const float id = d ? 1.0f / d : 0.0f;
  put_f16(b, d);
  int8_t* qs = reinterpret_cast<int8_t*>(b + 2);
  for (int j = 0; j < 32; ++j) qs[j] = static_cast<int8_t>(std::roundf(x[j] * id));
}

void q_q4_0(const float* x, uint8_t* b) {
  const float max = signed_absmax(x, 32);
  const float d = max / -8;
  const float id = d ? 1.0f / d : 0.0f;
  put_f16(b, d);
  for (int j = 0; j < 16; ++j) {
    const uint8_t x0 = std::min<uint8_t>(15, static_cast<int8_t>(x[j] * id + 8.5f));
    const uint8_t x1 = std::min<uint8_t>(15, static_cast<int8_t>(x[16 + j] * id + 8.5f));
    b[2 + j] = x0 | (x1 << 4);
  }
}

void q_q4_1(const float* x, uint8_t* b) {
  float mn = INFINITY, mx = -INFINITY;
  for (int j = 0; j < 32; ++j) {
    mn = std::fmin(mn, x[j]);
    mx = std::fmax(mx, x[j]);
  }
  const float d = (mx - mn) / ((1 << 4) - 1);
  const float id = d ? 1.0f / d : 0.0f;
  put_f16(b, d);
  put_f16(b + 2, mn);
  for (int j = 0; j < 16; ++j) {
    const uint8_t x0 = std::min<uint8_t>(15, static_cast<int8_t>((x[j] - mn) * id + 0.5f));
    const uint8_t x1 = std::min<uint8_t>(15, static_cast<int8_t>((x[16 + j] - mn) * id + 0.5f));
    b[4 + j] = x0 | (x1 << 4);
  }
}

void q_q5_0(const float* x, uint8_t* b) {
  const float max = signed_absmax(x, 32);
  const float d = max / -16;
  const float id = d ? 1.0f / d : 0.0f;
  put_f16(b, d);
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    const uint8_t x0 = std::min<uint8_t>(31, static_cast<int8_t>(x[j] * id + 16.5f));
    const uint8_t x1 = std::min<uint8_t>(31, static_cast<int8_t>(x[16 + j] * id + 16.5f));
    b[6 + j] = (x0 & 0x0F) | ((x1 & 0x0F) << 4);
    qh |= ((x0 & 0x10u) >> 4) << (j + 0);
    qh |= ((x1 & 0x10u) >> 4) << (j + 16);
  }
  std::memcpy(b + 2, &qh, 4);
}

void q_q5_1(const float* x, uint8_t* b) {
  float mn = INFINITY, mx = -INFINITY;
  for (int j = 0; j < 32; ++j) {
    mn = std::fmin(mn, x[j]);
    mx = std::fmax(mx, x[j]);
  }
  const float d = (mx - mn) / ((1 << 5) - 1);
  const float id = d ? 1.0f / d : 0.0f;
  put_f16(b, d);
  put_f16(b + 2, mn);
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    const uint8_t x0 = static_cast<uint8_t>((x[j] - mn) * id + 0.5f);
    const uint8_t x1 = static_cast<uint8_t>((x[16 + j] - mn) * id + 0.5f);
    b[8 + j] = (x0 & 0x0F) | ((x1 & 0x0F) << 4);
    qh |= ((x0 & 0x10u) >> 4) << (j + 0);
    qh |= ((x1 & 0x10u) >> 4) << (j + 16);
  }
  std::memcpy(b + 4, &qh, 4);
}

using BlockFn = void (*)(const float*, uint8_t*);

BlockFn block_fn(uint32_t t) {
  switch (t) {
    case Q8_0: return q_q8_0;
    case Q4_0: return q_q4_0;
    case Q4_1: return q_q4_1;
    case Q5_0: return q_q5_0;
    case Q5_1: return q_q5_1;
    case Q4_K: return quantize_block_q4_k;
    case Q6_K: return quantize_block_q6_k;
    default: return nullptr;
  }
}

}  // namespace

bool can_quantize(uint32_t t) {
  return t == F32 || t == F16 || t == BF16 || block_fn(t) != nullptr;
}

void quantize(uint32_t type, const float* src, void* dst, int64_t n) {
  const Format& tr = get(type);
  if (!can_quantize(type)) fail(ErrorCategory::Unsupported, "quantization to ", tr.name, " is not supported");
  row_bytes(type, n);  // throws unless n is a whole number of blocks
  uint8_t* p = static_cast<uint8_t*>(dst);
  switch (type) {
    case F32: std::memcpy(p, src, static_cast<size_t>(n) * 4); return;
    case F16:
      for (int64_t i = 0; i < n; ++i) put_f16(p + 2 * i, src[i]);
      return;
    case BF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h = f32_to_bf16(src[i]);
        std::memcpy(p + 2 * i, &h, 2);
      }
      return;
    default: break;
  }
  // A block format has no code for inf or NaN, and the reference rounding would convert them
  // to integers (undefined): such a row is refused, naming the element.
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(src[i]))
      fail(ErrorCategory::InvalidArgument, "cannot quantize to ", tr.name, ": element ", i, " of the row is ", src[i],
           " (block formats hold finite values only)");
  BlockFn fn = block_fn(type);
  for (int64_t b = 0; b < n / tr.block_elems; ++b) fn(src + b * tr.block_elems, p + b * tr.block_bytes);
}

}  // namespace rlx::quant
