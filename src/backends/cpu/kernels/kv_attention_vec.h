// Internal: kv_attention's group kernels (kv_attention.h), written once over the vector
// traits struct V and compiled in each ISA region (kv_attention_avx2.cpp,
// kv_attention_avx512.cpp). The including file defines, inside its region and namespace:
//   struct V                          -- vec_traits_avx2.h / vec_traits_avx512.h (W lanes);
//   V::F load_half(const uint16_t* p) -- W halves at p widened to f32;
//   V::F pair_sum(V::F a, V::F b)     -- in each 128-bit lane [a0+a2, b0+b2, a1+a3, b1+b3];
//   V::F quad_sum(V::F a, V::F b)     -- in each 128-bit lane [a0+a2, a1+a3, b0+b2, b1+b3];
//   V::F lane_sum(V::F* c)            -- c[0..W/4) summed across their 128-bit lanes, lane
//                                        k of c[i] to 128-bit lane i of the result.
// Scores: W rows at a time widened once into a block of f32 (rows past n zeros), a row's
// products with a head's query summed into one vector, the W vectors reduced by sum_lanes
// (no horizontal sum per row). Weighted sums: up to four heads' outputs held in registers
// over the rows, d in chunks of up to four vectors. Each score and each output element is
// summed in an order fixed by d, W and the row's place in its block, never by the thread
// count or by how many heads share the call.
// The including file includes <algorithm> and <type_traits> at file scope.
#pragma once

// Row j's chunk c (W values) as f32.
inline V::F row_chunk(const void* rows, bool f16, int64_t j, int64_t d, int64_t c) {
  if (f16) return load_half(static_cast<const uint16_t*>(rows) + j * d + V::W * c);
  return V::load(static_cast<const float*>(rows) + j * d + V::W * c);
}

// Lane j: the sum of a[j]'s lanes, j < W, by a fixed tree: pairs and quads of rows within
// each 128-bit lane, then across the lanes.
inline V::F sum_lanes(V::F* a) {
  V::F b[V::W / 2], c[V::W / 4];
  for (int i = 0; i < V::W / 2; ++i) b[i] = pair_sum(a[2 * i], a[2 * i + 1]);
  for (int i = 0; i < V::W / 4; ++i) c[i] = quad_sum(b[2 * i], b[2 * i + 1]);
  return lane_sum(c);
}

// NC = d / W vectors a row.
template <int NC>
void scores_nc(const void* rows, bool f16, int64_t n, const float* q, int64_t g, float* s, int64_t lds) {
  constexpr int W = V::W;
  constexpr int64_t d = W * NC;
  alignas(64) float kb[W * d];  // W rows widened once for every head
  for (int64_t j0 = 0; j0 < n; j0 += W) {
    const int rn = int(std::min<int64_t>(W, n - j0));
    for (int r = 0; r < W; ++r)
#pragma GCC unroll 32
      for (int c = 0; c < NC; ++c)
        V::store(kb + r * d + W * c, r < rn ? row_chunk(rows, f16, j0 + r, d, c) : V::zero());
    for (int64_t h = 0; h < g; ++h) {
      const float* qh = q + h * d;
      V::F a[W];
#pragma GCC unroll 16
      for (int r = 0; r < W; ++r) {
        a[r] = V::mul(V::load(kb + r * d), V::load(qh));
#pragma GCC unroll 32
        for (int c = 1; c < NC; ++c) a[r] = V::fmadd(V::load(kb + r * d + W * c), V::load(qh + W * c), a[r]);
      }
      V::store_tail(s + h * lds + j0, V::tail(rn), sum_lanes(a));
    }
  }
}

// HN heads at once over CH vectors of d from vector c0, their HN x CH sums held over the rows.
template <int NC, int CH, int HN>
void mix_heads(const void* rows, bool f16, int64_t n, const float* p, int64_t ldp, float* o, int c0) {
  constexpr int W = V::W;
  constexpr int64_t d = W * NC;
  V::F acc[HN][CH];
#pragma GCC unroll 4
  for (int h = 0; h < HN; ++h)
#pragma GCC unroll 4
    for (int c = 0; c < CH; ++c) acc[h][c] = V::load(o + h * d + W * (c0 + c));
  for (int64_t j = 0; j < n; ++j) {
    V::F v[CH];
#pragma GCC unroll 4
    for (int c = 0; c < CH; ++c) v[c] = row_chunk(rows, f16, j, d, c0 + c);
#pragma GCC unroll 4
    for (int h = 0; h < HN; ++h) {
      const V::F w = V::set1(p[h * ldp + j]);
#pragma GCC unroll 4
      for (int c = 0; c < CH; ++c) acc[h][c] = V::fmadd(w, v[c], acc[h][c]);
    }
  }
#pragma GCC unroll 4
  for (int h = 0; h < HN; ++h)
#pragma GCC unroll 4
    for (int c = 0; c < CH; ++c) V::store(o + h * d + W * (c0 + c), acc[h][c]);
}

// The chunk of d a value pass takes: the most vectors, up to four (two with AVX2's sixteen
// registers: four heads' two accumulators, two row vectors and the weight), that divide NC.
constexpr int mix_chunk(int nc) {
  for (int ch = V::W == 16 ? 4 : 2; ch > 1; --ch)
    if (nc % ch == 0) return ch;
  return 1;
}

// Heads in passes of up to four (a group of up to four reads each value row once), d in
// chunks of CH vectors (each chunk pass reads its own part of the rows).
template <int NC>
void mix_nc(const void* rows, bool f16, int64_t n, const float* p, int64_t ldp, int64_t g, float* o) {
  constexpr int CH = mix_chunk(NC), kHeads = 4;
  for (int64_t h = 0; h < g;) {
    const int hn = int(std::min<int64_t>(kHeads, g - h));
    const float* ph = p + h * ldp;
    float* oh = o + h * V::W * NC;
    for (int c0 = 0; c0 < NC; c0 += CH) switch (hn) {
        case 4: mix_heads<NC, CH, 4>(rows, f16, n, ph, ldp, oh, c0); break;
        case 3: mix_heads<NC, CH, 3>(rows, f16, n, ph, ldp, oh, c0); break;
        case 2: mix_heads<NC, CH, 2>(rows, f16, n, ph, ldp, oh, c0); break;
        default: mix_heads<NC, CH, 1>(rows, f16, n, ph, ldp, oh, c0); break;
      }
    h += hn;
  }
}

// f(std::integral_constant<int, NC>{}) for d = W NC, d = 16, 32, ..., 128 or 256 (the d
// kv_kernels(isa, d) hands these kernels).
template <class Fn>
void with_nc(int64_t d, Fn&& f) {
  switch (d / 16) {
    case 1: return f(std::integral_constant<int, 16 / V::W>{});
    case 2: return f(std::integral_constant<int, 32 / V::W>{});
    case 3: return f(std::integral_constant<int, 48 / V::W>{});
    case 4: return f(std::integral_constant<int, 64 / V::W>{});
    case 5: return f(std::integral_constant<int, 80 / V::W>{});
    case 6: return f(std::integral_constant<int, 96 / V::W>{});
    case 7: return f(std::integral_constant<int, 112 / V::W>{});
    case 8: return f(std::integral_constant<int, 128 / V::W>{});
    default: return f(std::integral_constant<int, 256 / V::W>{});
  }
}

inline void kv_scores(const void* rows, bool f16, int64_t n, int64_t d, const float* q, int64_t g, float* s,
                      int64_t lds) {
  with_nc(d, [&](auto nc) { scores_nc<decltype(nc)::value>(rows, f16, n, q, g, s, lds); });
}

inline void kv_mix(const void* rows, bool f16, int64_t n, int64_t d, const float* p, int64_t ldp, int64_t g,
                   float* o) {
  with_nc(d, [&](auto nc) { mix_nc<decltype(nc)::value>(rows, f16, n, p, ldp, g, o); });
}
