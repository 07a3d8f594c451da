// Internal: the device kernels of the CUDA backend (the .cu files), as host launch
// functions on a stream. Element-wise and copy kernels index through per-operand element
// strides over the iteration dims (0: broadcast, negative: reversed), up to kMaxRank dims.
// Errors a kernel finds in the data (an index out of range) are recorded in `err`
// (device memory: code, then the 1-based schedule step) for the host to report after the
// run; a launch failure is returned by cudaGetLastError to the caller.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "ir/host_device.h"

namespace rlx::cuda {

// True when kernels may be launched with programmatic dependent launch (device_util.cuh):
// a device of compute capability 9.0 or newer and RLX_CUDA_PDL not 0. Read once.
bool pdl_enabled();
// Thread-block clusters (compute capability 9.0 and newer), asked once.
bool clusters();
// The launch configuration of a kernel that begins by waiting for its predecessor
// (griddepcontrol.wait): allowed to start early when pdl_enabled(). `attr` is the storage
// for the attribute and must outlive the launch call.
inline cudaLaunchConfig_t pdl_config(dim3 grid, dim3 block, size_t smem, cudaStream_t s, cudaLaunchAttribute* attr) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  attr->id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr->val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl_enabled() ? 1 : 0;
  return cfg;
}
// pdl_config for a grid of thread-block clusters of `cluster` blocks (along x). `attr`: two
// attributes' storage, outliving the launch call.
inline cudaLaunchConfig_t cluster_config(dim3 grid, dim3 block, unsigned cluster, cudaStream_t s,
                                         cudaLaunchAttribute* attr) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.stream = s;
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = cluster;
  attr[0].val.clusterDim.y = attr[0].val.clusterDim.z = 1;
  attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[1].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl_enabled() ? 2 : 1;
  return cfg;
}

constexpr int kMaxRank = 8;

struct Iter {                  // the iteration space: row-major dims
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t numel = 1;
};
struct Strides {               // one operand's element strides over Iter's dims
  int64_t s[kMaxRank] = {};
  int64_t base = 0;            // element offset of index 0
};

// Host side: drops unit dims of `it` and merges each dim into the one outside it where every
// operand's strides allow (s[outer] == s[inner] * dims[inner]), so the kernels divide less;
// an operand written contiguously in `it`'s order (the output of most kernels) always allows it.
inline void coalesce(Iter& it, Strides* const* ops, int n_ops) {  // n_ops <= 10
  Iter r;
  Strides out[10];
  for (int k = 0; k < it.rank; ++k) {
    if (it.dims[k] == 1) continue;
    bool merge = r.rank > 0;
    for (int o = 0; o < n_ops && merge; ++o) merge = ops[o]->s[k] * it.dims[k] == out[o].s[r.rank - 1];
    if (merge) {
      r.dims[r.rank - 1] *= it.dims[k];
      for (int o = 0; o < n_ops; ++o) out[o].s[r.rank - 1] = ops[o]->s[k];
    } else {
      r.dims[r.rank] = it.dims[k];
      for (int o = 0; o < n_ops; ++o) out[o].s[r.rank] = ops[o]->s[k];
      ++r.rank;
    }
  }
  r.numel = it.numel;
  for (int o = 0; o < n_ops; ++o) {
    out[o].base = ops[o]->base;
    *ops[o] = out[o];
  }
  it = r;
}

// Element types the kernels know (a subset of rlx::DType, mapped by the lowering).
enum class ET : int { F32, F16, BF16, F64, I8, U8, I16, I32, I64, Bool, U32 };

enum class UnaryOp : int {
  Abs, Neg, Exp, Log, Sqrt, Rsqrt, Reciprocal, Sin, Cos, Tan, Asin, Acos, Atan, Sinh, Cosh, Asinh, Acosh, Atanh,
  Tanh, Sigmoid, Relu, Gelu, GeluTanh, Silu, Softplus, Softsign, Mish, HardSwish, HardSigmoid, LeakyRelu, Elu,
  Selu, Celu, ThresholdedRelu, Clip, Erf, Floor, Ceil, Round, Sign, IsNaN, IsInf, Not, BitNot
};
struct UnaryArgs {
  UnaryOp op = UnaryOp::Abs;
  float alpha = 0, beta = 0;   // ScalarAttrs / clip bounds
  bool neg = true, pos = true; // is_inf
};
// y = op(x) over n contiguous elements of type t: float ops in F32 / F64; abs, neg, sign,
// relu and bitwise not also on integers; is_nan / is_inf write bool; not reads bool.
cudaError_t unary(const UnaryArgs& a, ET t, const void* x, void* y, int64_t n, cudaStream_t s);

enum class BinaryOp : int {
  Add, Sub, Mul, Div, Pow, Max, Min, FMod, FloorMod, BitAnd, BitOr, BitXor, And, Or, Xor,
  Eq, Ne, Lt, Le, Gt, Ge
};
// y[i] = a[sa(i)] op b[sb(i)]: operands of type t, y of type t (bool for comparisons and
// logical ops). t: F32, F64, I32, I64, U8, I8, Bool (what the lowering claims).
cudaError_t binary(BinaryOp op, ET t, const void* a, const Strides& sa, const void* b, const Strides& sb, void* y,
                   const Iter& it, cudaStream_t s);
// y[i] = c[sc(i)] ? a[sa(i)] : b[sb(i)], elements of `elem` bytes.
cudaError_t where(int elem, const void* c, const Strides& sc, const void* a, const Strides& sa, const void* b,
                  const Strides& sb, void* y, const Iter& it, cudaStream_t s);
// fused_elementwise of f32 programs: inputs broadcast through strides to `it`; instruction j
// reads operands x (and y) from the inputs (index < n_in) or earlier results (n_in + k) and
// its result is operand n_in + j; the last result is the output.
constexpr int kMaxFusedInputs = 8, kMaxFusedOps = 16;
struct FusedInstr {
  int kind = 0;  // 0 unary, 1 binary, 2 identity
  UnaryArgs u;
  BinaryOp b = BinaryOp::Add;
  int x = 0, y = 0;
};
struct FusedArgs {
  Iter it;
  int n_in = 0, n_ops = 0;
  Strides in[kMaxFusedInputs];
  FusedInstr ops[kMaxFusedOps];
};
struct FusedPtrs {
  const void* in[kMaxFusedInputs] = {};  // every input and the output of type t
};
cudaError_t fused(ET t, const FusedArgs& a, const FusedPtrs& p, void* y, cudaStream_t s);
// y = (to) x over n elements.
// Keeps the stream busy for about `ns` nanoseconds (RLX_PROFILE queues a run behind it).
cudaError_t spin(int64_t ns, cudaStream_t s);
// The end of a run (backend.cpp), one launch: small device copies (the handles an output
// feeds back into an input: a decode step's token and position) and the run's error record
// into host memory mapped for the device (err_host; nullptr: not copied here).
struct RunEnd {
  static constexpr int kMaxCopies = 8;
  static constexpr uint32_t kMaxBytes = 1u << 16;  // larger copies go through cudaMemcpyAsync
  const uint8_t* src[kMaxCopies] = {};
  uint8_t* dst[kMaxCopies] = {};
  uint32_t bytes[kMaxCopies] = {};
  int n = 0;
  const int* err = nullptr;
  int* err_host = nullptr;
};
cudaError_t run_end(const RunEnd& e, cudaStream_t s);
cudaError_t cast(ET from, ET to, const void* x, void* y, int64_t n, cudaStream_t s);
// y[so(i)] = x[sx(i)] for every i of `it`, elements of `elem` bytes (1, 2, 4, 8):
// transpose, slice, expand, concat and split pieces.
cudaError_t strided_copy(int elem, const void* x, const Strides& sx, void* y, const Strides& sy, const Iter& it,
                         cudaStream_t s);
// c[batch, m, n] = a[batch][m, k] . b[batch][k, n] for the types cuBLASLt has no product of
// (exact_matmul_type: f64, and the integers, wrapping in the element type as the CPU's do);
// the operands' matrices at batch index i (row-major over the dims of `it`) start at
// offset_of(i, it, as / bs) (stride 0: broadcast); c is contiguous. matmul_exact.cu.
bool exact_matmul_type(ET t);
cudaError_t exact_matmul(ET t, const void* a, const void* b, void* c, int64_t m, int64_t n, int64_t k, const Iter& it,
                         const Strides& as, const Strides& bs, cudaStream_t s);
// Gather along one axis: data [outer, dim, inner] (elements of `elem` bytes), indices
// (i32 or i64, n_idx of them; negative counts from the end), y [outer, n_idx, inner].
cudaError_t gather(int elem, const void* data, int64_t outer, int64_t dim, int64_t inner, const void* idx,
                   bool idx64, int64_t n_idx, void* y, int* err, int step, cudaStream_t s);

// Pad (mode 0 constant, 1 reflect, 2 edge; negative pads crop): out index o on dim k reads
// input index o - begin[k], mapped into the input by the mode or filled with `fill` (the
// element's bytes, little-endian in the low bytes).
struct PadArgs {
  int mode = 0;
  int64_t begin[kMaxRank] = {};
  uint64_t fill = 0;
};
cudaError_t pad(int elem, const void* x, const Iter& in, const PadArgs& a, void* y, const Iter& out, cudaStream_t s);

// NCHW convolution of f32, f16 or bf16 operands (f32 accumulation; groups, strides, dilations, top/left pads; bias or nullptr) and
// pooling (max or average, count_include_pad; taps past input + padding never count).
struct ConvArgs {
  int64_t n, c, h, w, cout, kh, kw, oh, ow, sh, sw, pt, pl, dh, dw, group;
  bool nhwc = false;  // x, w and y channels last (cuDNN only: the kernels here are NCHW)
};
cudaError_t conv2d(const ConvArgs& a, ET t, const void* x, const void* wt, const void* bias, void* y, cudaStream_t s);
// The GEMM form of a group-1 convolution: col [images, kp, oh*ow] of images [n0, n0 +
// images) (zeros where the window leaves the input, and rows K = c*kh*kw .. kp-1 zero: the
// padding that keeps W's rows 16-byte aligned), for y[n] = W [cout, kp] col[n]; `folded`:
// col [kp, images * oh*ow] instead (one product for the chunk). Elements of `elem` bytes
// (zero bits are +0 in every float type).
cudaError_t im2col(const ConvArgs& a, int elem, const void* x, int64_t n0, int64_t images, void* col, int64_t kp,
                   bool folded, cudaStream_t s);
// y [n, cout, p] += bias[cout].
cudaError_t add_channel_bias(ET t, const void* bias, void* y, int64_t n, int64_t cout, int64_t p, cudaStream_t s);
struct PoolArgs {
  bool is_max = true, count_include_pad = false;
  int64_t planes, h, w, oh, ow, kh, kw, sh, sw, pt, pl, pb, pr, dh, dw;
  int64_t c = 1;  // channels innermost (NHWC: planes = N, c = C); 1 for NCHW (planes = N*C)
};
cudaError_t pool2d(const PoolArgs& a, ET t, const void* x, void* y, cudaStream_t s);
// argmax / argmin over the middle dim of [outer, n, inner] into i64 (first index of the
// extreme value, or the last with select_last; NaN wins, as on the CPU); any type (f32 long
// rows by a block or a cluster per output, the rest a thread per output).
cudaError_t arg_reduce(bool is_max, bool select_last, ET t, const void* x, int64_t outer, int64_t n, int64_t inner,
                       int64_t* y, cudaStream_t s);

// qmatmul: y[m, n] = x[m, :] . dequant(W[n, :]) for W's rows in GGUF block format `format`
// (ggml type numbers: 0 F32, 1 F16, 2 Q4_0, 3 Q4_1, 6 Q5_0, 7 Q5_1, 8 Q8_0, 12 Q4_K, 13 Q5_K,
// 14 Q6_K), row_bytes per row. qmatmul_id: m = tokens * slots pairs,
// pair p uses expert ids[p] (i32 / i64; one out of range is recorded in err) of W [E, N,
// row_bytes] and x row p (x_per_slot) or p / slots.
struct QMatMulArgs {
  int format = 0;
  int64_t m = 0, n = 0, k = 0, row_bytes = 0;
  // qmatmul's residual may be read before the kernel waits for its predecessor (grid_wait):
  // no byte of it is written by the launch before (LaunchCtx::settled).
  bool residual_settled = false;
  // norm_qmatmul's scale may be read before the wait in the same sense (a model's norm
  // weights are params: always).
  bool scale_settled = false;
};
// True for the formats listed above: the ones the kernels are built for (and the lowering
// claims); the launches refuse any other with cudaErrorInvalidValue.
bool qmatmul_format(int format);
// residual (nullable, [m, n] f32): y = x . W^T + residual (qmatmul and the add after it as
// one kernel, rounded as the two ops are; residual may alias y).
cudaError_t qmatmul(const QMatMulArgs& a, const float* x, const uint8_t* w, const float* residual, float* y,
                    cudaStream_t s);
// rms_norm of the single row x [k] (scale nullable, eps) then qmatmul of the result (m == 1,
// k <= kNormQMatMulMaxK: the row is held in shared memory), with the same bits as the two.
// gate_row >= 0 (0 or n / 2; n even): the product's rows are a SwiGLU's gate (from
// gate_row) and up halves, and y [n / 2] = silu(gate) * up as the element-wise program
// rounds it (the three launches' bits). grid: norm_qmatmul_grid(a, gate_row >= 0), asked
// once when the launch is built (a device query).
constexpr int64_t kNormQMatMulMaxK = 12288;
unsigned norm_qmatmul_grid(const QMatMulArgs& a, bool glu = false);
cudaError_t norm_qmatmul(const QMatMulArgs& a, unsigned grid, const float* x, const float* scale, float eps,
                         const uint8_t* w, float* y, cudaStream_t s, int64_t gate_row = -1);
cudaError_t qmatmul_id(const QMatMulArgs& a, int64_t experts, int64_t slots, bool x_per_slot, const float* x,
                       const uint8_t* w, const void* ids, bool ids64, float* y, int* err, int step, cudaStream_t s);
// attention (ops.def) of whole sequences: q [b, hq, sq, d], k [b, hkv, sk, d], v [b, hkv, sk,
// dv], out [b, hq, sq, dv], all of type et (F32, F16 or BF16); mask (nullptr: none) of the same
// type, read at b*mst[0] + h*mst[1] + i*mst[2] + j*mst[3] (0: broadcast); d, dv <=
// kAttentionMaxDim; scale already resolved (the op's 0 is 1/sqrt(d) by now).
constexpr int64_t kAttentionMaxDim = 128;
// Sq * Sk from which the backend claims attention by default (lower.cpp), per kernel: measured
// on the H200 against the decomposition (b1 h16 d64 causal), the tensor-core kernel is ahead
// from 512 x 512 (0.084 vs 0.090 ms; 2.5x at 2048), the CUDA-core one level at 2048 x 2048
// (1.54 vs 1.52 ms) and ahead at 4096 (5.19 vs 5.69); above them the decomposition also
// writes Sq x Sk scores per head to memory.
constexpr int64_t kAttentionMinScoresLow = 512 * 512, kAttentionMinScoresF32 = 2048 * 2048;
struct AttentionArgs {
  int64_t b = 0, hq = 0, hkv = 0, sq = 0, sk = 0, d = 0, dv = 0;
  int64_t mst[4] = {0, 0, 0, 0};
  // Element strides over (batch, head, position) of q, k, v and out (a row's D elements
  // contiguous): heads-first {H*S*D, S*D, D}, bshd {S*H*D, D, H*D}. set_strides fills them.
  int64_t qst[3] = {0, 0, 0}, kst[3] = {0, 0, 0}, vst[3] = {0, 0, 0}, ost[3] = {0, 0, 0};
  void set_strides(bool bshd) {
    auto put = [bshd](int64_t* st, int64_t h, int64_t s, int64_t d) {
      st[0] = h * s * d;
      st[1] = bshd ? d : s * d;
      st[2] = bshd ? h * d : d;
    };
    put(qst, hq, sq, d);
    put(kst, hkv, sk, d);
    put(vst, hkv, sk, dv);
    put(ost, hq, sq, dv);
  }
  float scale = 1;
  bool causal = false;
};
// Once per process, before the first launch (and outside stream capture): lets the
// tensor-core kernel use the shared memory its widest heads need.
cudaError_t attention_prepare();
cudaError_t attention(const AttentionArgs& a, ET et, const void* q, const void* k, const void* v, const void* mask,
                      void* out, cudaStream_t s);
// kv_attention (ops.def): q f32 [b, hq, t, d]; caches [b, hkv, c, d] and new rows [b, hkv, t,
// d] in f16 or f32; past i64 [b] (outside [0, c]: recorded in err); d <= 256.
struct KvAttentionArgs {
  int64_t b = 0, hq = 0, hkv = 0, t = 0, c = 0, d = 0;
  float scale = 1;
  bool past_settled = false;  // past may be read before the wait (as QMatMulArgs::residual_settled)
};
cudaError_t kv_attention(const KvAttentionArgs& a, bool f16, const float* q, const void* kc, const void* vc,
                         const void* kn, const void* vn, const int64_t* past, float* out, int* err, int step,
                         cudaStream_t s);

// rotary (ops.def) of f32 x [rows = b*h*s, d] with cos/sin [s, half]: the first 2*half
// dims rotated in pairs, the rest copied.
struct RotaryArgs {
  int64_t rows = 0, s = 0, d = 0, half = 0;
  bool interleaved = false;
};
cudaError_t rotary(const RotaryArgs& a, const float* x, const float* cs, const float* sn, float* y, cudaStream_t s);
// Two independent rotaries in one launch (step fusion of a decode step's Q and K).
struct RotaryPtrs {
  const float* x = nullptr;
  const float* cs = nullptr;
  const float* sn = nullptr;
  float* y = nullptr;
};
cudaError_t rotary_pair(const RotaryArgs& a, const RotaryPtrs& pa, const RotaryArgs& b, const RotaryPtrs& pb,
                        cudaStream_t s);

// cache_write (ops.def): rows [b, h, t, d] into cache [b, h, c, d] at rows past[b] .. +t
// (outside [0, c - t]: recorded in err); elements of `elem` bytes (1, 2, 4, 8). out == cache
// when the output shares the cache's storage, else the cache is copied first.
struct CacheWriteArgs {
  int64_t b = 0, h = 0, c = 0, t = 0, d = 0;
  bool past_settled = false;  // past may be read before the wait (kv_store; as QMatMulArgs::residual_settled)
  // Elements of the new rows [b, h, t, d] and of the cache [b, h, c, d].
  RLX_HOST_DEVICE int64_t rows() const { return b * h * t * d; }
  RLX_HOST_DEVICE int64_t cache() const { return b * h * c * d; }
};
cudaError_t cache_write(const CacheWriteArgs& a, int elem, const void* cache, const void* rows, const int64_t* past,
                        void* out, int* err, int step, cudaStream_t s);
// A cast of f32 rows to `to` (F16 or BF16) and their cache_write as one kernel: the rounded
// rows go into the cache as cache_write puts them, and to `rounded` (the cast's result)
// unless it is null.
cudaError_t cache_write_cast(const CacheWriteArgs& a, ET to, const void* cache, const float* rows, void* rounded,
                             const int64_t* past, void* out, int* err, int step, cudaStream_t s);

// A decode step's rotaries and K/V cache writes as one launch (step fusion of six nodes,
// lower_kv_store): the Q rotary (`q`); the K rotary whose rows are cast to `to` and written
// into the K cache, each element in registers from rotation to cache (`k`; k.y null when
// only the cast reads it, k_rounded null when only the cache write reads the cast); V's f32
// rows cast and written into the V cache. Bits as the six launches give them; a cache whose
// output is not its input's storage is copied first, as cache_write does.
struct KvStorePtrs {
  RotaryPtrs q, k;
  const void* k_cache = nullptr;
  void* k_rounded = nullptr;
  void* k_out = nullptr;
  const float* v = nullptr;
  const void* v_cache = nullptr;
  void* v_rounded = nullptr;
  void* v_out = nullptr;
  const int64_t* k_past = nullptr;
  const int64_t* v_past = nullptr;
};
cudaError_t kv_store(const RotaryArgs& q, const RotaryArgs& k, const CacheWriteArgs& kw, const CacheWriteArgs& vw, ET to,
                     const KvStorePtrs& p, int* err, int step, cudaStream_t s);

// kv_store followed by the kv_attention that reads its results, as one launch (step fusion
// of seven nodes, lower_kv_attention): the attention's blocks rotate their queries from the
// Q rotary's input (p.q.x) and make the step's new K / V row (rotated, rounded to f16) in
// registers, and one lane group per sequence and KV head writes it into the caches, so no
// rotated or rounded row goes through memory. Bits as kv_store then kv_attention. The fused
// kernel takes one new row per sequence (t = 1), f16 caches written in place, head dims of
// 32, 64, 128 or 256 rotated whole, the rotaries' rows laid out as the attention reads
// them; elsewhere (and where kv_attention would not take its by-KV-head kernel) this runs
// the two launches, writing p.q.y, p.k_rounded and p.v_rounded (buffers of their own).
cudaError_t kv_store_attention(const RotaryArgs& q, const RotaryArgs& k, const CacheWriteArgs& kw,
                               const CacheWriteArgs& vw, const KvStorePtrs& p, const KvAttentionArgs& a, float* out,
                               int* err, int step, cudaStream_t s);

// topk over the middle dim of [outer, n, inner], any type: values and i64 indices [outer, k,
// inner], in the CPU's order (largest or smallest first; NaN first when largest; ties by
// index), whatever `sorted` says.
cudaError_t topk(bool largest, ET t, const void* x, int64_t outer, int64_t n, int64_t inner, int64_t k, void* vals,
                 int64_t* idx, cudaStream_t s);

enum class ReduceOp : int { Sum, Mean, Max, Min, Prod };
// y[o] = reduce over r of x[base(o) + r-offset]: the kept dims (`kept`, strides `ks` into
// x) index the outputs, the reduced dims (`red`, strides `rs`) the terms. Floats (F32, F64):
// every op, accumulated in the type; integers: max and min.
cudaError_t reduce(ReduceOp op, ET t, const void* x, const Iter& kept, const Strides& ks, const Iter& red,
                   const Strides& rs, void* y, cudaStream_t s);
// Softmax / log-softmax over the middle dim of [outer, n, inner], operands of float type t
// (f32, f16, bf16: statistics in f32, one rounding on store).
cudaError_t softmax(bool log, ET t, const void* x, void* y, int64_t outer, int64_t n, int64_t inner, cudaStream_t s);
// Layer norm (rms = false) or RMS norm over rows of `cols`, every operand of type t as
// above; scale / bias: cols elements or nullptr.
cudaError_t norm(bool rms, ET t, const void* x, const void* scale, const void* bias, void* y, int64_t rows,
                 int64_t cols, float eps, cudaStream_t s);

}  // namespace rlx::cuda
