/*
 * make_quant_fixtures: writes the llama.cpp/ggml block (de)quantization reference
 * fixtures under tests/data/gguf/quants/ (see the README.md there).
 *
 * This program is NOT part of the rlx build. It links against ggml's base library
 * (ggml-base, which holds the reference quantizers of ggml-quants.c) from llama.cpp
 * release v0.5.0 (commit de3ff81, as bundled in node-llama-cpp@3.22.1), using only
 * ggml's public API (ggml.h). To rebuild the fixtures, from the rlx repository root:
 *
 *   mkdir -p /work/scratch/x
 *   tar -xzf node-llama-cpp-3.22.1.tgz -C /work/scratch/x     # npm pack node-llama-cpp@3.22.1
 *   git clone /work/scratch/x/package/llama/gitRelease.bundle /work/scratch/llama.cpp-src
 *   cmake -S /work/scratch/llama.cpp-src -B /work/scratch/llama-build \
 *         -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DLLAMA_OPENSSL=OFF \
 *         -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TESTS=OFF \
 *         -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF
 *   cmake --build /work/scratch/llama-build -j1 --target ggml-base
 *   g++ -std=c++20 -O2 -Wall -Wextra \
 *       -I /work/scratch/llama.cpp-src/ggml/include \
 *       tools/gguf-fixtures/make_quant_fixtures.cpp \
 *       -L /work/scratch/llama-build/bin -lggml-base \
 *       -Wl,-rpath,/work/scratch/llama-build/bin \
 *       -o /work/scratch/make_quant_fixtures
 *   mkdir -p tests/data/gguf/quants
 *   /work/scratch/make_quant_fixtures tests/data/gguf/quants
 *
 * The generated files were produced on x86-64 with GCC 12 and GGML_NATIVE=OFF (so the
 * library is compiled for baseline x86-64: no FMA contraction in ggml-quants.c).
 *
 * All pseudo-random numbers come from a splitmix64 generator and are turned into floats
 * with exact IEEE arithmetic only (the only libm calls are the exact ldexp, fabs and nextafter), so the inputs are identical on every
 * platform. "Gaussian" values are Irwin-Hall approximations (sum of 12 uniforms - 6).
 */

#include "ggml.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

static_assert(std::endian::native == std::endian::little, "fixtures are little-endian");

namespace {

constexpr uint64_t kSeed = 0x726c782d67677566ull;  // "rlx-gguf"

struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed) {}
  uint64_t next() {  // splitmix64
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return double(next() >> 11) * 0x1.0p-53; }     // [0, 1)
  int range(int lo, int hi) { return lo + int(next() % uint64_t(hi - lo + 1)); }  // [lo, hi]
  double gauss() {
    double s = 0;
    for (int i = 0; i < 12; ++i) s += uniform();
    return s - 6.0;
  }
  double sign() { return (next() & 1) ? -1.0 : 1.0; }
  // 2^k * (1 + u), k in [klo, khi]: a log-spread positive scale, computed exactly.
  double scale(int klo, int khi) { return std::ldexp(1.0 + uniform(), range(klo, khi)); }
  uint16_t finite_f16() {  // any finite half (normal, subnormal, zero; either sign)
    for (;;) {
      uint16_t h = uint16_t(next());
      if (((h >> 10) & 0x1f) != 0x1f) return h;
    }
  }
  uint16_t finite_bf16() {
    for (;;) {
      uint16_t h = uint16_t(next());
      if (((h >> 7) & 0xff) != 0xff) return h;
    }
  }
};

// Leaves x as is (an exact tie), or moves it one ulp up or down.
float nudge(Rng& r, float x) {
  switch (r.range(0, 2)) {
    case 0: return std::nextafter(x, -std::numeric_limits<float>::infinity());
    case 1: return std::nextafter(x, std::numeric_limits<float>::infinity());
    default: return x;
  }
}

// Fills one group of 32 values with the given "character" (kind 0..11).
void fill_group32(Rng& r, float* x, int kind) {
  const int n = 32;
  double s = r.scale(-8, 4);
  switch (kind) {
    case 0:  // plain gaussian
      for (int i = 0; i < n; ++i) x[i] = float(s * r.gauss());
      break;
    case 1:  // all zero
      for (int i = 0; i < n; ++i) x[i] = 0.0f;
      break;
    case 2: {  // gaussian plus one large outlier
      for (int i = 0; i < n; ++i) x[i] = float(s * r.gauss());
      x[r.range(0, n - 1)] = float(r.sign() * s * (20.0 + 20.0 * r.uniform()));
      break;
    }
    case 3: {  // constant
      float c = float(r.sign() * s);
      for (int i = 0; i < n; ++i) x[i] = c;
      break;
    }
    case 4: {  // tiny values around 1e-6
      double t = 1e-6 * (1.0 + r.uniform());
      for (int i = 0; i < n; ++i) x[i] = float(t * r.gauss());
      break;
    }
    case 5:  // all negative
      for (int i = 0; i < n; ++i) x[i] = float(-s * (std::fabs(r.gauss()) + 0.5 * r.uniform()));
      break;
    case 6:  // gaussian with a positive offset (min > 0 for most groups)
      for (int i = 0; i < n; ++i) x[i] = float(s * (r.gauss() + 4.0));
      break;
    case 7:  // sparse: about half the values exactly zero
      for (int i = 0; i < n; ++i) x[i] = (r.next() & 1) ? float(s * r.gauss()) : 0.0f;
      break;
    case 8: {  // exact half-integer grid (exercises round-half cases)
      double p = std::ldexp(1.0, r.range(-6, 2));
      for (int i = 0; i < n; ++i) x[i] = float(p * 0.5 * r.range(-16, 16));
      break;
    }
    case 9: {  // Q8_0 ties: amax = 127p makes d = p exact, others at (j + 1/2)p, some 1 ulp off
      double p = std::ldexp(1.0, r.range(-8, 0));
      for (int i = 0; i < n; ++i) x[i] = nudge(r, float(p * (r.range(-127, 126) + 0.5)));
      x[r.range(0, n - 1)] = float(r.sign() * 127.0 * p);
      break;
    }
    case 10: {  // Q4_0 ties: max = -8p makes d = p exact, others at half-integers * p, 1 ulp off
      double p = r.sign() * std::ldexp(1.0, r.range(-8, 0));
      for (int i = 0; i < n; ++i) x[i] = nudge(r, float(p * (r.range(-8, 7) + 0.5)));
      x[r.range(0, n - 1)] = float(-8.0 * p);
      break;
    }
    case 11: {  // Q4_1/Q5_1 ties: max - min = 15p or 31p, others at min + half-integers * p
      const int levels = (r.next() & 1) ? 15 : 31;
      double p = std::ldexp(1.0, r.range(-8, 0));
      double mn = (r.next() & 1) ? 0.0 : -p * r.range(1, levels);
      for (int i = 0; i < n; ++i) x[i] = nudge(r, float(mn + p * (r.range(0, levels - 1) + 0.5)));
      const int o = r.range(0, n - 1);
      x[o] = float(mn);
      x[(o + 11) % n] = float(mn + levels * p);
      // Just below the first half step: with mn = 0, (x - min) * id + 0.5f rounds up to 1.
      x[(o + 23) % n] = std::nextafter(float(mn + 0.5 * p), float(mn));
      break;
    }
    default:
      std::abort();
  }
}

// Input for the quantized 3/4 of the blocks.
std::vector<float> make_input(Rng& r, ggml_type type, int64_t n) {
  std::vector<float> x(static_cast<size_t>(n), 0.0f);
  const int64_t blck = ggml_blck_size(type);
  if (blck == 256) {
    // Super-block characters; the sub-blocks (32) of one super-block vary within it.
    static const int kMixed[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    static const int kMixed2[8] = {5, 6, 8, 3, 9, 10, 11, 0};
    for (int64_t b = 0; b < n / 256; ++b) {
      float* sb = x.data() + b * 256;
      const int kind = int(b % 6);
      switch (kind) {
        case 0:
          for (int j = 0; j < 8; ++j) fill_group32(r, sb + 32 * j, kMixed[j]);
          break;
        case 1:
          break;  // all zero
        case 2: {  // gaussian with widely varying per-sub-block scale plus one outlier
          int k0 = r.range(-8, -2);
          for (int j = 0; j < 8; ++j) {
            double s = std::ldexp(1.0 + r.uniform(), k0 + j);
            for (int i = 0; i < 32; ++i) sb[32 * j + i] = float(s * r.gauss());
          }
          sb[r.range(0, 255)] = float(r.sign() * std::ldexp(40.0, k0 + 4));
          break;
        }
        case 3: {  // constant
          float c = float(r.sign() * r.scale(-6, 3));
          for (int i = 0; i < 256; ++i) sb[i] = c;
          break;
        }
        case 4:
          for (int j = 0; j < 8; ++j) fill_group32(r, sb + 32 * j, 4);
          break;
        case 5:
          for (int j = 0; j < 8; ++j) fill_group32(r, sb + 32 * j, kMixed2[j]);
          break;
      }
    }
  } else {
    for (int64_t b = 0; b < n / 32; ++b) fill_group32(r, x.data() + b * 32, int(b % 12));
  }
  if (type == GGML_TYPE_F16 || type == GGML_TYPE_BF16) {
    // The last group of the quantized part holds conversion edge cases
    // (ties, overflow, subnormals, infinities, NaNs).
    const float inf = std::numeric_limits<float>::infinity();
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const float edge[32] = {
        0.0f, -0.0f, 1.0f, 1.0f + 0x1p-11f, 1.0f + 0x3p-11f, 65504.0f, 65519.0f, 65520.0f,
        -65520.0f, 0x1p-24f, 0x1p-25f, 0x3p-25f, 0x1p-14f, 0x1p-14f - 0x1p-25f, 1e-8f, 1e10f,
        inf, -inf, nan, -nan, 0.1f, 1.0f / 3.0f, -2.5e-5f, 6.1e-5f,
        0x3p-16f, 1e-30f, std::numeric_limits<float>::min(), std::numeric_limits<float>::max(),
        1.0f + 0x1p-8f, 1.0f + 0x3p-8f, 1.0f + 0x1p-8f + 0x1p-20f, 1e-40f};
    std::memcpy(x.data() + n - 32, edge, sizeof edge);
  }
  return x;
}

// Byte offsets of the fp16 fields of each block struct (ggml-common.h, v0.5.0).
std::vector<size_t> f16_field_offsets(ggml_type t) {
  switch (t) {
    case GGML_TYPE_Q4_0: return {0};       // d, qs[16]
    case GGML_TYPE_Q4_1: return {0, 2};    // d, m, qs[16]
    case GGML_TYPE_Q5_0: return {0};       // d, qh[4], qs[16]
    case GGML_TYPE_Q5_1: return {0, 2};    // d, m, qh[4], qs[16]
    case GGML_TYPE_Q8_0: return {0};       // d, qs[32]
    case GGML_TYPE_Q2_K: return {80, 82};  // scales[16], qs[64], d, dmin
    case GGML_TYPE_Q3_K: return {108};     // hmask[32], qs[64], scales[12], d
    case GGML_TYPE_Q4_K: return {0, 2};    // d, dmin, scales[12], qs[128]
    case GGML_TYPE_Q5_K: return {0, 2};    // d, dmin, scales[12], qh[32], qs[128]
    case GGML_TYPE_Q6_K: return {208};     // ql[128], qh[64], scales[16], d
    case GGML_TYPE_IQ4_NL: return {0};     // d, qs[16]
    case GGML_TYPE_IQ4_XS: return {0};     // d, scales_h, scales_l[4], qs[128]
    default: std::abort();
  }
}

// Random bytes for `nblocks` blocks, with every fp16 field a random finite half.
void random_blocks(Rng& r, ggml_type t, uint8_t* dst, int64_t nblocks) {
  const size_t bs = ggml_type_size(t);
  if (t == GGML_TYPE_F16 || t == GGML_TYPE_BF16) {
    for (int64_t i = 0; i < nblocks; ++i) {
      uint16_t h = t == GGML_TYPE_F16 ? r.finite_f16() : r.finite_bf16();
      std::memcpy(dst + i * 2, &h, 2);
    }
    return;
  }
  const std::vector<size_t> offs = f16_field_offsets(t);
  for (int64_t i = 0; i < nblocks; ++i) {
    uint8_t* b = dst + size_t(i) * bs;
    for (size_t k = 0; k < bs; ++k) b[k] = uint8_t(r.next());
    for (size_t o : offs) {
      uint16_t h = r.finite_f16();
      std::memcpy(b + o, &h, 2);
    }
  }
}

bool write_file(const std::string& path, const void* data, size_t n) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) {
    std::perror(path.c_str());
    return false;
  }
  bool ok = std::fwrite(data, 1, n, f) == n;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) std::fprintf(stderr, "write failed: %s\n", path.c_str());
  return ok;
}

size_t quantize(ggml_type t, const float* src, uint8_t* dst, int64_t n) {
  const int64_t n_per_row = 256;
  // imatrix = nullptr: exactly how llama-quantize calls it without an importance matrix.
  return ggml_quantize_chunk(t, src, dst, 0, n / n_per_row, n_per_row, nullptr);
}

struct Spec {
  ggml_type type;
  bool quant_ref;  // also write .qsrc.f32 / .qref
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIR\n", argv[0]);
    return 2;
  }
  const std::string out = argv[1];
  const Spec specs[] = {
      {GGML_TYPE_F16, true},    {GGML_TYPE_BF16, true},   {GGML_TYPE_Q4_0, true},
      {GGML_TYPE_Q4_1, true},   {GGML_TYPE_Q5_0, true},   {GGML_TYPE_Q5_1, true},
      {GGML_TYPE_Q8_0, true},   {GGML_TYPE_Q2_K, false},  {GGML_TYPE_Q3_K, false},
      {GGML_TYPE_Q4_K, true},   {GGML_TYPE_Q5_K, false},  {GGML_TYPE_Q6_K, true},
      {GGML_TYPE_IQ4_NL, false}, {GGML_TYPE_IQ4_XS, false},
  };

  std::printf("%-8s %4s %8s %8s %12s %10s\n", "type", "id", "elems", "blocks", "blocks_bytes",
              "qref_bytes");
  for (const Spec& sp : specs) {
    const ggml_type t = sp.type;
    const int64_t blck = ggml_blck_size(t);
    const int64_t n = blck == 256 ? 2048 : 4096;
    const int64_t nq = n * 3 / 4;  // quantized part; the rest is random blocks
    const size_t bytes = ggml_row_size(t, n);
    const size_t qbytes = ggml_row_size(t, nq);
    if (ggml_quantize_requires_imatrix(t)) {
      std::fprintf(stderr, "%s requires an imatrix\n", ggml_type_name(t));
      return 1;
    }

    Rng rng(kSeed ^ (uint64_t(t) * 0x100000001b3ull));
    std::vector<float> src = make_input(rng, t, nq);
    std::vector<uint8_t> blocks(bytes);
    if (quantize(t, src.data(), blocks.data(), nq) != qbytes) {
      std::fprintf(stderr, "%s: unexpected quantized size\n", ggml_type_name(t));
      return 1;
    }
    random_blocks(rng, t, blocks.data() + qbytes, (n - nq) / blck);

    std::vector<float> deq(static_cast<size_t>(n));
    ggml_get_type_traits(t)->to_float(blocks.data(), deq.data(), n);

    const std::string base = out + "/" + ggml_type_name(t);
    if (!write_file(base + ".blocks", blocks.data(), bytes) ||
        !write_file(base + ".f32", deq.data(), deq.size() * sizeof(float)))
      return 1;

    size_t qref_bytes = 0;
    if (sp.quant_ref) {
      std::vector<float> qsrc = src;
      Rng grng(kSeed ^ 0x5a5a5a5aull ^ (uint64_t(t) << 40));
      for (int64_t b = 0; b < (n - nq) / 32; ++b) {
        double s = grng.scale(-6, 2);
        for (int i = 0; i < 32; ++i) qsrc.push_back(float(s * grng.gauss()));
      }
      std::vector<uint8_t> qref(bytes);
      if (quantize(t, qsrc.data(), qref.data(), n) != bytes) {
        std::fprintf(stderr, "%s: unexpected quantized size\n", ggml_type_name(t));
        return 1;
      }
      // The first 3/4 is the same input, so it must give the same bytes as .blocks.
      if (std::memcmp(qref.data(), blocks.data(), qbytes) != 0) {
        std::fprintf(stderr, "%s: .qref prefix differs from .blocks\n", ggml_type_name(t));
        return 1;
      }
      if (!write_file(base + ".qsrc.f32", qsrc.data(), qsrc.size() * sizeof(float)) ||
          !write_file(base + ".qref", qref.data(), qref.size()))
        return 1;
      qref_bytes = qref.size();
    }
    std::printf("%-8s %4d %8lld %8lld %12zu %10zu\n", ggml_type_name(t), int(t), (long long)n,
                (long long)(n / blck), bytes, qref_bytes);
  }
  return 0;
}
