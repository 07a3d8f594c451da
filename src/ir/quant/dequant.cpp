// Reference dequantization of ggml block types (one block at a time, in float, with the
// same order of operations as ggml's reference code so results are bit-identical).
// Block layouts (ggml-common.h), little-endian, `d`/`dmin`/`m` are IEEE half floats.
#include <cstring>

#include "rlx/dtype.h"
#include "rlx/error.h"
#include "rlx/quant.h"
#include "ir/quant/block_util.h"

namespace rlx::quant {

namespace {

using detail::h2f;
using detail::scale_min_k4;

// ggml type numbers of the formats handled here.
enum : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q2_K = 10, Q3_K = 11, Q4_K = 12,
  Q5_K = 13, Q6_K = 14, IQ4_NL = 20, IQ4_XS = 23, F64 = 28, BF16 = 30,
};

using detail::kIq4nl;

void dq_q4_0(const uint8_t* b, float* y) {
  const float d = h2f(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    const int x0 = (qs[j] & 0x0F) - 8, x1 = (qs[j] >> 4) - 8;
    y[j] = x0 * d;
    y[j + 16] = x1 * d;
  }
}
void dq_q4_1(const uint8_t* b, float* y) {
  const float d = h2f(b), m = h2f(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < 16; ++j) {
    const int x0 = qs[j] & 0x0F, x1 = qs[j] >> 4;
    y[j] = x0 * d + m;
    y[j + 16] = x1 * d + m;
  }
}
void dq_q5_0(const uint8_t* b, float* y) {
  const float d = h2f(b);
  uint32_t qh;
  std::memcpy(&qh, b + 2, 4);
  const uint8_t* qs = b + 6;
  for (int j = 0; j < 16; ++j) {
    const uint8_t h0 = ((qh >> j) << 4) & 0x10, h1 = (qh >> (j + 12)) & 0x10;
    const int x0 = ((qs[j] & 0x0F) | h0) - 16, x1 = ((qs[j] >> 4) | h1) - 16;
    y[j] = x0 * d;
    y[j + 16] = x1 * d;
  }
}
void dq_q5_1(const uint8_t* b, float* y) {
  const float d = h2f(b), m = h2f(b + 2);
  uint32_t qh;
  std::memcpy(&qh, b + 4, 4);
  const uint8_t* qs = b + 8;
  for (int j = 0; j < 16; ++j) {
    const uint8_t h0 = ((qh >> j) << 4) & 0x10, h1 = (qh >> (j + 12)) & 0x10;
    const int x0 = (qs[j] & 0x0F) | h0, x1 = (qs[j] >> 4) | h1;
    y[j] = x0 * d + m;
    y[j + 16] = x1 * d + m;
  }
}
void dq_q8_0(const uint8_t* b, float* y) {
  const float d = h2f(b);
  const int8_t* qs = reinterpret_cast<const int8_t*>(b + 2);
  for (int j = 0; j < 32; ++j) y[j] = qs[j] * d;
}
void dq_iq4_nl(const uint8_t* b, float* y) {
  const float d = h2f(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * kIq4nl[qs[j] & 0xf];
    y[j + 16] = d * kIq4nl[qs[j] >> 4];
  }
}

// Q2_K: scales[16] (low nibble scale, high nibble min), qs[64] (2-bit), d, dmin.
void dq_q2_k(const uint8_t* b, float* y) {
  const uint8_t* scales = b;
  const uint8_t* q = b + 16;
  const float d = h2f(b + 80), mn = h2f(b + 82);
  int is = 0;
  for (int n = 0; n < 256; n += 128) {
    int shift = 0;
    for (int j = 0; j < 4; ++j) {
      for (int half = 0; half < 2; ++half) {
        const uint8_t sc = scales[is++];
        const float dl = d * (sc & 0xF), ml = mn * (sc >> 4);
        for (int l = 0; l < 16; ++l) *y++ = dl * static_cast<int8_t>((q[l + 16 * half] >> shift) & 3) - ml;
      }
      shift += 2;
    }
    q += 32;
  }
}

// Q3_K: hmask[32] (high bit), qs[64] (low 2 bits), scales[12] (16 6-bit scales), d.
void dq_q3_k(const uint8_t* b, float* y) {
  const uint8_t* hm = b;
  const uint8_t* q = b + 32;
  const float d = h2f(b + 108);
  constexpr uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
  uint32_t aux[4];
  std::memcpy(aux, b + 96, 12);
  const uint32_t tmp = aux[2];
  aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
  aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
  aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
  aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
  int8_t scales[16];
  std::memcpy(scales, aux, 16);
  int is = 0;
  uint8_t m = 1;
  for (int n = 0; n < 256; n += 128) {
    int shift = 0;
    for (int j = 0; j < 4; ++j) {
      for (int half = 0; half < 2; ++half) {
        const float dl = d * (scales[is++] - 32);
        for (int l = 16 * half; l < 16 * half + 16; ++l)
          *y++ = dl * (static_cast<int8_t>((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
      }
      shift += 2;
      m <<= 1;
    }
    q += 32;
  }
}

void dq_q4_k(const uint8_t* b, float* y) {
  const float d = h2f(b), mn = h2f(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* q = b + 16;
  int is = 0;
  for (int j = 0; j < 256; j += 64) {
    uint8_t sc, m;
    scale_min_k4(is + 0, scales, sc, m);
    const float d1 = d * sc, m1 = mn * m;
    scale_min_k4(is + 1, scales, sc, m);
    const float d2 = d * sc, m2 = mn * m;
    for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
    q += 32;
    is += 2;
  }
}

void dq_q5_k(const uint8_t* b, float* y) {
  const float d = h2f(b), mn = h2f(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* ql = b + 48;
  int is = 0;
  uint8_t u1 = 1, u2 = 2;
  for (int j = 0; j < 256; j += 64) {
    uint8_t sc, m;
    scale_min_k4(is + 0, scales, sc, m);
    const float d1 = d * sc, m1 = mn * m;
    scale_min_k4(is + 1, scales, sc, m);
    const float d2 = d * sc, m2 = mn * m;
    for (int l = 0; l < 32; ++l) *y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
    ql += 32;
    is += 2;
    u1 <<= 2;
    u2 <<= 2;
  }
}

// Q6_K: ql[128] (low 4 bits), qh[64] (high 2 bits), scales[16] (int8), d.
void dq_q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = h2f(b + 208);
  for (int n = 0; n < 256; n += 128) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int8_t q1 = static_cast<int8_t>((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int8_t q2 = static_cast<int8_t>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int8_t q3 = static_cast<int8_t>((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int8_t q4 = static_cast<int8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l + 0] = d * sc[is + 0] * q1;
      y[l + 32] = d * sc[is + 2] * q2;
      y[l + 64] = d * sc[is + 4] * q3;
      y[l + 96] = d * sc[is + 6] * q4;
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

// IQ4_XS: d, scales_h (u16: 2 high bits per sub-block), scales_l[4] (nibbles), qs[128].
void dq_iq4_xs(const uint8_t* b, float* y) {
  const float d = h2f(b);
  uint16_t scales_h;
  std::memcpy(&scales_h, b + 2, 2);
  const uint8_t* scales_l = b + 4;
  const uint8_t* qs = b + 8;
  for (int ib = 0; ib < 8; ++ib) {
    const int ls = ((scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((scales_h >> 2 * ib) & 3) << 4);
    const float dl = d * (ls - 32);
    for (int j = 0; j < 16; ++j) {
      y[j] = dl * kIq4nl[qs[j] & 0xf];
      y[j + 16] = dl * kIq4nl[qs[j] >> 4];
    }
    y += 32;
    qs += 16;
  }
}

using BlockFn = void (*)(const uint8_t*, float*);

BlockFn block_fn(uint32_t t) {
  switch (t) {
    case Q4_0: return dq_q4_0;
    case Q4_1: return dq_q4_1;
    case Q5_0: return dq_q5_0;
    case Q5_1: return dq_q5_1;
    case Q8_0: return dq_q8_0;
    case Q2_K: return dq_q2_k;
    case Q3_K: return dq_q3_k;
    case Q4_K: return dq_q4_k;
    case Q5_K: return dq_q5_k;
    case Q6_K: return dq_q6_k;
    case IQ4_NL: return dq_iq4_nl;
    case IQ4_XS: return dq_iq4_xs;
    default: return nullptr;
  }
}

}  // namespace

bool can_dequantize(uint32_t t) {
  return t == F32 || t == F16 || t == BF16 || t == F64 ||
         block_fn(t) != nullptr;
}

void dequantize(uint32_t type, const void* src, float* dst, int64_t n) {
  const Format& tr = get(type);
  if (!can_dequantize(type)) fail(ErrorCategory::Unsupported, "dequantization of ", tr.name, " is not supported");
  if (n < 0 || n % tr.block_elems) row_bytes(type, n);  // throws naming the type
  const uint8_t* p = static_cast<const uint8_t*>(src);
  switch (type) {
    case F32: std::memcpy(dst, p, static_cast<size_t>(n) * 4); return;
    case F16:
      for (int64_t i = 0; i < n; ++i) dst[i] = h2f(p + 2 * i);
      return;
    case BF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        dst[i] = bf16_to_f32(h);
      }
      return;
    case F64:
      for (int64_t i = 0; i < n; ++i) {
        double v;
        std::memcpy(&v, p + 8 * i, 8);
        dst[i] = static_cast<float>(v);
      }
      return;
    default: break;
  }
  BlockFn fn = block_fn(type);
  for (int64_t b = 0; b < n / tr.block_elems; ++b) fn(p + b * tr.block_bytes, dst + b * tr.block_elems);
}

}  // namespace rlx::quant
