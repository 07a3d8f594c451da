// Typed attribute structs, one per family of ops (see ops.def for which op uses which).
// Each struct lists its fields once in visit(); the text format, equality, hashing
// (CSE) and the verifier all go through visit(), so adding a field is one line.
#pragma once
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "rlx/dtype.h"

namespace rlx {

enum class OpKind : uint16_t {
#define RLX_OP(kind, name, attrs, min_in, max_in, n_out, traits, infer) kind,
#include "rlx/ops.def"
#undef RLX_OP
};
inline constexpr int kNumOpKinds = 0
#define RLX_OP(kind, name, attrs, min_in, max_in, n_out, traits, infer) +1
#include "rlx/ops.def"
#undef RLX_OP
    ;

std::string_view op_name(OpKind k);  // the text name, e.g. "matmul"

// Immutable shared bytes (constant values, initial param data). Copies share storage.
class Blob {
 public:
  Blob() = default;
  explicit Blob(std::vector<uint8_t> bytes)
      : bytes_(std::make_shared<const std::vector<uint8_t>>(std::move(bytes))) {}
  bool empty() const { return !bytes_ || bytes_->empty(); }
  size_t size() const { return bytes_ ? bytes_->size() : 0; }
  const uint8_t* data() const { return bytes_ ? bytes_->data() : nullptr; }
  template <class T> const T* as() const { return reinterpret_cast<const T*>(data()); }
  friend bool operator==(const Blob& a, const Blob& b);

  // A reference that does not keep the bytes alive: lock() gives them back while some Blob
  // still holds them, an empty Blob after the last one is gone (a cache that must not pin
  // what its users released).
  class Weak {
   public:
    Blob lock() const {
      Blob b;
      b.bytes_ = p_.lock();
      return b;
    }

   private:
    friend class Blob;
    std::weak_ptr<const std::vector<uint8_t>> p_;
  };
  Weak weak() const {
    Weak w;
    w.p_ = bytes_;
    return w;
  }

 private:
  std::shared_ptr<const std::vector<uint8_t>> bytes_;
};

enum class Activation : uint8_t { None, Relu, Gelu, GeluTanh, Silu, Sigmoid, Tanh, LeakyRelu };
enum class PadMode : uint8_t { Constant, Reflect, Edge };
std::string_view enum_name(Activation a);
std::string_view enum_name(PadMode m);
bool parse_enum(std::string_view s, Activation& out);
bool parse_enum(std::string_view s, PadMode& out);

struct NoAttrs {
  template <class V> void visit(V&) {}
};
struct LeafAttrs {  // input / param: the public name; param may carry initial data
  std::string name;
  Blob init;
  template <class V> void visit(V& v) { v("name", name); v("init", init); }
};
struct ConstantAttrs {
  Blob value;
  template <class V> void visit(V& v) { v("value", value); }
};
struct ScalarAttrs {  // the ONNX alpha / beta (gamma) of an activation; per op in ops.def
  double alpha = 0, beta = 0;
  template <class V> void visit(V& v) { v("alpha", alpha); v("beta", beta); }
};
struct ClipAttrs {  // clip(x, min, max); an infinite bound is no bound
  double min = -std::numeric_limits<double>::infinity(), max = std::numeric_limits<double>::infinity();
  template <class V> void visit(V& v) { v("min", min); v("max", max); }
};
struct GeluAttrs {  // tanh_approx: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); else the erf form
  bool tanh_approx = false;
  template <class V> void visit(V& v) { v("tanh_approx", tanh_approx); }
};
struct ModAttrs {  // fmod: C fmod (sign of the dividend); else Python floor-mod (sign of the divisor)
  bool fmod = false;
  template <class V> void visit(V& v) { v("fmod", fmod); }
};
struct IsInfAttrs {  // which infinities answer true (ONNX IsInf: both by default)
  bool detect_negative = true, detect_positive = true;
  template <class V> void visit(V& v) { v("detect_negative", detect_negative); v("detect_positive", detect_positive); }
};
struct CastAttrs {
  DType to = DType::F32;
  template <class V> void visit(V& v) { v("to", to); }
};
struct AxisAttrs {
  int64_t axis = -1;
  template <class V> void visit(V& v) { v("axis", axis); }
};
struct ReduceAttrs {
  std::vector<int64_t> axes;  // empty: all axes
  bool keepdims = true;
  template <class V> void visit(V& v) { v("axes", axes); v("keepdims", keepdims); }
};
struct ArgReduceAttrs {
  int64_t axis = 0;
  bool keepdims = true;
  bool select_last_index = false;
  template <class V> void visit(V& v) {
    v("axis", axis); v("keepdims", keepdims); v("select_last_index", select_last_index);
  }
};
struct TopKAttrs {
  int64_t k = 1, axis = -1;
  bool largest = true, sorted = true;
  template <class V> void visit(V& v) { v("k", k); v("axis", axis); v("largest", largest); v("sorted", sorted); }
};
struct NormAttrs {  // normalizes over [axis, rank)
  int64_t axis = -1;
  double epsilon = 1e-5;
  template <class V> void visit(V& v) { v("axis", axis); v("epsilon", epsilon); }
};
struct ShapeAttrs {  // reshape: -1 infers one dim; expand: numpy-broadcast target
  std::vector<int64_t> shape;
  template <class V> void visit(V& v) { v("shape", shape); }
};
struct TransposeAttrs {
  std::vector<int64_t> perm;
  template <class V> void visit(V& v) { v("perm", perm); }
};
struct SliceAttrs {  // numpy/ONNX slice semantics with clamping; steps may be negative
  std::vector<int64_t> starts, ends, axes, steps;
  template <class V> void visit(V& v) { v("starts", starts); v("ends", ends); v("axes", axes); v("steps", steps); }
};
struct SplitAttrs {
  int64_t axis = 0;
  std::vector<int64_t> sizes;
  template <class V> void visit(V& v) { v("axis", axis); v("sizes", sizes); }
};
struct PadAttrs {  // pads = [begin_0..begin_{r-1}, end_0..end_{r-1}]; negative pads crop
  std::vector<int64_t> pads;
  PadMode mode = PadMode::Constant;
  double value = 0;
  template <class V> void visit(V& v) { v("pads", pads); v("mode", mode); v("value", value); }
};
struct TileAttrs {
  std::vector<int64_t> repeats;
  template <class V> void visit(V& v) { v("repeats", repeats); }
};
struct ConvAttrs {  // pads = [top, left, bottom, right]
  std::vector<int64_t> strides{1, 1}, pads{0, 0, 0, 0}, dilations{1, 1};
  int64_t group = 1;
  // Channels last: x [N,H,W,C], w [M,kH,kW,C/group], y [N,Ho,Wo,M] (conv2d and fused_conv2d;
  // the channels-last pass writes it where the backend claims it) instead of NCHW / MCkHkW.
  bool nhwc = false;
  template <class V> void visit(V& v) {
    v("strides", strides); v("pads", pads); v("dilations", dilations); v("group", group); v("nhwc", nhwc);
  }
};
struct FusedConvAttrs {  // act(conv2d(x, w, bias) + residual)
  std::vector<int64_t> strides{1, 1}, pads{0, 0, 0, 0}, dilations{1, 1};
  int64_t group = 1;
  Activation activation = Activation::None;
  double alpha = 0;  // leaky_relu slope
  bool nhwc = false;  // as ConvAttrs::nhwc; the residual is then [N,Ho,Wo,M] too
  ConvAttrs conv() const { return ConvAttrs{strides, pads, dilations, group, nhwc}; }
  template <class V> void visit(V& v) {
    v("strides", strides); v("pads", pads); v("dilations", dilations); v("group", group);
    v("activation", activation); v("alpha", alpha); v("nhwc", nhwc);
  }
};
struct PoolAttrs {
  std::vector<int64_t> kernel{1, 1}, strides{1, 1}, pads{0, 0, 0, 0}, dilations{1, 1};
  bool ceil_mode = false, count_include_pad = false;
  bool nhwc = false;  // x [N,H,W,C] -> y [N,Ho,Wo,C] instead of NCHW
  template <class V> void visit(V& v) {
    v("kernel", kernel); v("strides", strides); v("pads", pads); v("dilations", dilations);
    v("ceil_mode", ceil_mode); v("count_include_pad", count_include_pad); v("nhwc", nhwc);
  }
};
struct AttentionAttrs {
  double scale = 0;  // 0: 1/sqrt(D)
  bool causal = false;
  // q, k, v and the output are [B, S, H, D] (each sequence position's heads side by side, as
  // the projections write them) instead of [B, H, S, D]; the mask is still over [B, H, Sq, Sk].
  bool bshd = false;
  template <class V> void visit(V& v) { v("scale", scale); v("causal", causal); v("bshd", bshd); }
};
struct RotaryAttrs {
  bool interleaved = false;  // true: rotate pairs (2i, 2i+1); false: halves (i, i+R/2)
  template <class V> void visit(V& v) { v("interleaved", interleaved); }
};
struct QMatMulAttrs {  // x[..., K] @ W^T with W: N rows of K elements in a block format (rlx/quant.h)
  int64_t format = 0;  // ggml type number of W's rows
  int64_t k = 0;       // elements per row of W (= x's last dim)
  template <class V> void visit(V& v) { v("format", format); v("k", k); }
};
struct FusedMatMulAttrs {  // act(matmul(a, b) + bias)
  Activation activation = Activation::None;
  double alpha = 0;  // leaky_relu slope
  template <class V> void visit(V& v) { v("activation", activation); v("alpha", alpha); }
};

// One instruction of a fused elementwise program. Operand index i < num_inputs names
// node input i; i >= num_inputs names the result of instruction i - num_inputs.
// The last instruction's result is the node's output.
struct FusedOp {
  OpKind kind = OpKind::Identity;
  std::vector<int32_t> args;
  double alpha = 0, beta = 0;  // the op's attributes as two numbers (ir::scalar_params)
  DType type = DType::F32;     // result dtype (for cast: the target)
  friend bool operator==(const FusedOp&, const FusedOp&) = default;
};
struct FusedElementwiseAttrs {
  std::vector<FusedOp> program;
  template <class V> void visit(V& v) { v("program", program); }
};

using Attrs = std::variant<NoAttrs, LeafAttrs, ConstantAttrs, ScalarAttrs, CastAttrs, AxisAttrs,
                           ReduceAttrs, ArgReduceAttrs, TopKAttrs, NormAttrs, ShapeAttrs,
                           TransposeAttrs, SliceAttrs, SplitAttrs, PadAttrs, TileAttrs, ConvAttrs, FusedConvAttrs,
                           PoolAttrs, AttentionAttrs, RotaryAttrs, FusedMatMulAttrs, QMatMulAttrs,
                           FusedElementwiseAttrs, ClipAttrs, GeluAttrs, ModAttrs, IsInfAttrs>;

// The attribute struct an op kind carries (default-constructed).
Attrs default_attrs(OpKind k);
bool attrs_equal(const Attrs& a, const Attrs& b);
size_t attrs_hash(const Attrs& a);

}  // namespace rlx
