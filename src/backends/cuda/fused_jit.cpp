#include "backends/cuda/fused_jit.h"

#include <cstdint>
#include <cstring>
#include <sstream>
#include <vector>

namespace rlx::cuda {

namespace {

// A float constant, bit-exact.
std::string flit(float f) {
  uint32_t bits = 0;
  std::memcpy(&bits, &f, sizeof bits);
  std::ostringstream o;
  o << "__int_as_float(" << int32_t(bits) << ")";
  return o.str();
}

std::string name_of(int operand, int n_in) {
  return operand < n_in ? "v" + std::to_string(operand) : "t" + std::to_string(operand - n_in);
}

// The interpreter's unary_f<float> and arith<float> (elementwise.cu), as expressions.
std::string unary_expr(const UnaryArgs& u, const std::string& x) {
  const std::string al = flit(u.alpha), be = flit(u.beta);
  switch (u.op) {
    case UnaryOp::Abs: return "fabsf(" + x + ")";
    case UnaryOp::Neg: return "-" + x;
    case UnaryOp::Exp: return "expf(" + x + ")";
    case UnaryOp::Log: return "logf(" + x + ")";
    case UnaryOp::Sqrt: return "sqrtf(" + x + ")";
    case UnaryOp::Rsqrt: return "1.0f / sqrtf(" + x + ")";
    case UnaryOp::Reciprocal: return "1.0f / " + x;
    case UnaryOp::Sin: return "sinf(" + x + ")";
    case UnaryOp::Cos: return "cosf(" + x + ")";
    case UnaryOp::Tan: return "tanf(" + x + ")";
    case UnaryOp::Asin: return "asinf(" + x + ")";
    case UnaryOp::Acos: return "acosf(" + x + ")";
    case UnaryOp::Atan: return "atanf(" + x + ")";
    case UnaryOp::Sinh: return "sinhf(" + x + ")";
    case UnaryOp::Cosh: return "coshf(" + x + ")";
    case UnaryOp::Asinh: return "asinhf(" + x + ")";
    case UnaryOp::Acosh: return "acoshf(" + x + ")";
    case UnaryOp::Atanh: return "atanhf(" + x + ")";
    case UnaryOp::Tanh: return "tanhf(" + x + ")";
    case UnaryOp::Sigmoid: return "1.0f / (1.0f + expf(-" + x + "))";
    case UnaryOp::Relu: return x + " > 0.0f ? " + x + " : (" + x + " == " + x + " ? 0.0f : " + x + ")";
    case UnaryOp::Gelu: return "0.5f * " + x + " * (1.0f + erff(" + x + " * " + flit(0.70710678118654752440f) + "))";
    case UnaryOp::GeluTanh:
      return "0.5f * " + x + " * (1.0f + tanhf(" + flit(0.7978845608028654f) + " * (" + x + " + " + flit(0.044715f) +
             " * " + x + " * " + x + " * " + x + ")))";
    case UnaryOp::Silu: return x + " / (1.0f + expf(-" + x + "))";
    case UnaryOp::Softplus: return x + " > 20.0f ? " + x + " : log1pf(expf(" + x + "))";
    case UnaryOp::Softsign: return x + " / (1.0f + fabsf(" + x + "))";
    case UnaryOp::Mish: return x + " * tanhf(" + x + " > 20.0f ? " + x + " : log1pf(expf(" + x + ")))";
    case UnaryOp::HardSwish: return x + " * fminf(fmaxf(" + x + " / 6.0f + 0.5f, 0.0f), 1.0f)";
    case UnaryOp::HardSigmoid: return "fminf(fmaxf(" + al + " * " + x + " + " + be + ", 0.0f), 1.0f)";
    case UnaryOp::LeakyRelu: return x + " >= 0.0f ? " + x + " : " + al + " * " + x;
    case UnaryOp::Elu: return x + " >= 0.0f ? " + x + " : " + al + " * (expf(" + x + ") - 1.0f)";
    case UnaryOp::Selu: return be + " * (" + x + " > 0.0f ? " + x + " : " + al + " * (expf(" + x + ") - 1.0f))";
    case UnaryOp::Celu:
      return "fmaxf(0.0f, " + x + ") + fminf(0.0f, " + al + " * (expf(" + x + " / " + al + ") - 1.0f))";
    case UnaryOp::ThresholdedRelu: return x + " > " + al + " ? " + x + " : 0.0f";
    case UnaryOp::Clip: return x + " != " + x + " ? " + x + " : fminf(fmaxf(" + x + ", " + al + "), " + be + ")";
    case UnaryOp::Erf: return "erff(" + x + ")";
    case UnaryOp::Floor: return "floorf(" + x + ")";
    case UnaryOp::Ceil: return "ceilf(" + x + ")";
    case UnaryOp::Round: return "rintf(" + x + ")";
    case UnaryOp::Sign: return x + " > 0.0f ? 1.0f : " + x + " < 0.0f ? -1.0f : " + x;
    default: return x;
  }
}

std::string binary_expr(BinaryOp b, const std::string& x, const std::string& y) {
  switch (b) {
    // Rounded intrinsics: the compiler may not contract them with a neighbouring op into
    // an fma (the interpreter and the CPU round every op's result).
    case BinaryOp::Add: return "__fadd_rn(" + x + ", " + y + ")";
    case BinaryOp::Sub: return "__fsub_rn(" + x + ", " + y + ")";
    case BinaryOp::Mul: return "__fmul_rn(" + x + ", " + y + ")";
    case BinaryOp::Div: return "__fdiv_rn(" + x + ", " + y + ")";
    case BinaryOp::Pow: return "powf(" + x + ", " + y + ")";
    case BinaryOp::Max: return "(" + x + " != " + x + " || " + y + " != " + y + ") ? " + x + " + " + y + " : (" + x + " > " + y + " ? " + x + " : " + y + ")";
    case BinaryOp::Min: return "(" + x + " != " + x + " || " + y + " != " + y + ") ? " + x + " + " + y + " : (" + x + " < " + y + " ? " + x + " : " + y + ")";
    case BinaryOp::FMod: return "float(fmod(double(" + x + "), double(" + y + ")))";
    case BinaryOp::FloorMod: return "rlx_floor_mod(" + x + ", " + y + ")";
    default: return x;
  }
}

// Which inputs need coordinates: contiguous in the output's order -> index i; all strides
// 0 -> one element; otherwise the sum of coordinates times strides.
enum { Linear, Scalar, General };
std::vector<int> input_kinds(const FusedArgs& a) {
  std::vector<int64_t> contig(size_t(a.it.rank), 1);
  for (int k = a.it.rank - 2; k >= 0; --k) contig[size_t(k)] = contig[size_t(k) + 1] * a.it.dims[k + 1];
  std::vector<int> kind(size_t(a.n_in));
  for (int k = 0; k < a.n_in; ++k) {
    bool lin = true, zero = true;
    for (int d = 0; d < a.it.rank; ++d) {
      lin = lin && a.in[k].s[d] == contig[size_t(d)];
      zero = zero && a.in[k].s[d] == 0;
    }
    kind[size_t(k)] = zero ? Scalar : lin ? Linear : General;
  }
  return kind;
}

}  // namespace

int fused_vector_width(const FusedArgs& a, ET t) {
  const int v = t == ET::F32 ? 4 : 8;  // elements of 16 bytes
  const std::vector<int> kind = input_kinds(a);
  for (int k = 0; k < a.n_in; ++k)
    if (kind[size_t(k)] == General || (kind[size_t(k)] == Linear && a.in[k].base % v != 0)) return 1;
  return v;
}

std::string fused_source(const FusedArgs& a, ET t) {
  const bool low = t != ET::F32;
  const char* S = low ? "unsigned short" : "float";
  std::ostringstream o;
  o << "__device__ __forceinline__ float rlx_floor_mod(float a, float b) {\n"
       "  const double r = fmod(double(a), double(b));\n"
       "  return float((r != 0 && ((r < 0) != (b < 0))) ? r + double(b) : r);\n}\n";
  if (t == ET::F16)
    o << "__device__ __forceinline__ float rlx_ld(unsigned short h) { float f; asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h)); return f; }\n"
         "__device__ __forceinline__ unsigned short rlx_st(float f) { unsigned short h; asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f));\n"
         "  return f != f ? (unsigned short)(((__float_as_uint(f) >> 16) & 0x8000u) | 0x7e00u) : h; }\n";  // NaN: as dev::stf
  else if (t == ET::BF16)
    o << "__device__ __forceinline__ float rlx_ld(unsigned short h) { return __uint_as_float(unsigned(h) << 16); }\n"
         "__device__ __forceinline__ unsigned short rlx_st(float f) { unsigned short h; asm(\"cvt.rn.bf16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f));\n"
         "  return f != f ? (unsigned short)((__float_as_uint(f) >> 16) | 0x40u) : h; }\n";  // NaN: as dev::stf
  else
    o << "__device__ __forceinline__ float rlx_ld(float f) { return f; }\n"
         "__device__ __forceinline__ float rlx_st(float f) { return f; }\n";
  if (low) o << "__device__ __forceinline__ float rlx_round(float f) { return rlx_ld(rlx_st(f)); }\n";
  o << "struct __align__(16) rlx_v16 { unsigned int w[4]; };\n";
  o << "extern \"C\" __global__ void " << kFusedKernelName << "(";
  for (int k = 0; k < a.n_in; ++k) o << "const " << S << "* in" << k << ", ";
  o << S << "* y, long long n) {\n";
  // Launched with programmatic dependent launch where the device has it (kernels.h): wait
  // for the previous kernel first, then let the next one start.
  o << "#if __CUDA_ARCH__ >= 900\n  asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");\n"
       "  asm volatile(\"griddepcontrol.launch_dependents;\" ::: \"memory\");\n#endif\n";
  const std::vector<int> kind = input_kinds(a);
  bool coords = false;
  for (int k : kind) coords = coords || k == General;
  const bool narrow = a.it.numel <= 0x7fffffff;
  const char* I = narrow ? "unsigned" : "long long";
  // Element i's loads (linear inputs from `lin`, the element's value when given), the
  // program, and the rounded result in `out`.
  auto body = [&](const std::string& ind, const std::vector<std::string>& lin, const std::string& out) {
    for (int k = 0; k < a.n_in; ++k) {
      o << ind << "const float v" << k << " = rlx_ld(";
      if (kind[size_t(k)] == Linear && !lin.empty()) {
        o << lin[size_t(k)];
      } else {
        o << "in" << k << "[";
        if (kind[size_t(k)] == Scalar) {
          o << a.in[k].base;
        } else if (kind[size_t(k)] == Linear) {
          o << a.in[k].base << "ll + i";
        } else {
          o << a.in[k].base << "ll";
          for (int d = 0; d < a.it.rank; ++d)
            if (a.in[k].s[d]) o << " + (long long)c" << d << " * " << a.in[k].s[d] << "ll";
        }
        o << "]";
      }
      o << ");\n";
    }
    for (int j = 0; j < a.n_ops; ++j) {
      const FusedInstr& ins = a.ops[j];
      const std::string x = name_of(ins.x, a.n_in), y = name_of(ins.y, a.n_in);
      const std::string e = ins.kind == 0 ? unary_expr(ins.u, x) : ins.kind == 1 ? binary_expr(ins.b, x, y) : x;
      o << ind << "const float t" << j << " = " << (low ? "rlx_round(" : "(") << e << ");\n";
    }
    o << ind << out << " = rlx_st(t" << a.n_ops - 1 << ");\n";
  };
  // Without coordinates (every input contiguous in the output's order or one element), a
  // thread moves 16 bytes of each contiguous input and of y at a time when their offsets and
  // pointers allow it: the same arithmetic per element, a quarter (f32) or an eighth (16-bit
  // types) of the loop's iterations and memory instructions.
  const int V = fused_vector_width(a, t);
  if (V > 1) {
    o << "  if (((";
    for (int k = 0; k < a.n_in; ++k)
      if (kind[size_t(k)] == Linear) o << "(unsigned long long)in" << k << " | ";
    o << "(unsigned long long)y) & 15ull) == 0) {\n";
    o << "    const long long nv = n / " << V << ";\n";
    o << "    for (long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x; j < nv; j += (long long)gridDim.x * blockDim.x) {\n";
    std::vector<std::string> lin(size_t(a.n_in));
    for (int k = 0; k < a.n_in; ++k) {
      if (kind[size_t(k)] != Linear) continue;
      o << "      rlx_v16 b" << k << " = *(const rlx_v16*)(in" << k << " + " << a.in[k].base << "ll + j * " << V << ");\n";
      lin[size_t(k)] = "((const " + std::string(S) + "*)&b" + std::to_string(k) + ")[e]";
    }
    o << "      rlx_v16 r;\n      #pragma unroll\n      for (int e = 0; e < " << V << "; ++e) {\n";
    body("        ", lin, "((" + std::string(S) + "*)&r)[e]");
    o << "      }\n      *(rlx_v16*)(y + j * " << V << ") = r;\n    }\n";
    o << "    for (long long i = nv * " << V
      << " + blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {\n";
    body("      ", {}, "y[i]");
    o << "    }\n    return;\n  }\n";
  }
  o << "  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {\n";
  if (coords) {
    o << "    " << I << " q = (" << I << ")i;\n";
    for (int d = a.it.rank - 1; d > 0; --d)
      o << "    const " << I << " c" << d << " = q % " << a.it.dims[d] << (narrow ? "u" : "ll") << "; q /= " << a.it.dims[d]
        << (narrow ? "u" : "ll") << ";\n";
    o << "    const " << I << " c0 = q;\n";
  }
  body("    ", {}, "y[i]");
  o << "  }\n}\n";
  return o.str();
}

}  // namespace rlx::cuda
