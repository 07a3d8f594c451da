// Internal: the engine behind every elementwise and fused-elementwise kernel.
//
// A kernel is a small program: instructions (one op each, dtypes resolved at build
// time) over node inputs and earlier results. The output index space is walked in
// segments of at most kBlock elements along the innermost (collapsed) dim; per
// segment every instruction runs once over the block, operands read either straight
// from the input (contiguous or one broadcast element) or from a block-sized slot.
// A single elementwise op is a one-instruction program whose result goes straight to
// the output, so unfused and fused execution compute bit-identical values.
//
// Results never depend on how [0, numel) is chunked, so any thread count gives the
// same bytes. A program that is a chain (ProgramCfg::chain) runs with its running value in
// registers instead of blocks.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backends/cpu/kernel.h"
#include "backends/cpu/kernels/elementwise_types.h"

namespace rlx::cpu::ew {

inline constexpr int64_t kBlock = 512;
inline constexpr size_t kMaxElemBytes = 16;
inline constexpr int kMaxValues = 256;  // node inputs + instructions of one program
inline constexpr int kMaxRank = 32;     // collapsed rank

enum class Form : uint8_t { Unary, Binary, Where, Convert };

// One op with its dtypes resolved: operands are staged to their compute dtype when
// the storage differs, the span runs, and the result is converted to `out` if needed.
struct SegOp {
  OpKind kind = OpKind::Identity;
  Form form = Form::Unary;
  int arity = 1;
  ConvertFn stage[3] = {};  // operand storage -> compute dtype; null: used as is
  ConvertFn finish = nullptr;  // span result -> out dtype; null: span writes out
  Span1 unary = nullptr;
  Span2Set binary;
  Span3 where = nullptr;
  ConvertFn convert = nullptr;
  OpParams params;
  DType out = DType::F32;
  int cost = 1;  // relative work per element (grain sizing)
};

// Resolves `kind` applied to operands of dtypes `in` producing `out`. alpha/beta are
// the op's ScalarAttrs. Returns false with a reason when the CPU backend lacks the
// combination.
bool resolve_op(OpKind kind, const std::vector<DType>& in, DType out, double alpha, double beta,
                Isa isa, SegOp& op, std::string& why);

// Numpy broadcasting of each input against the output, with size-1 dims dropped and
// adjacent dims merged where every input stays linear across them.
struct Layout {
  std::vector<int64_t> dims;                  // rank >= 1
  std::vector<std::vector<int64_t>> strides;  // [input][dim], elements; 0 = broadcast
  int64_t numel = 0;
};
// Throws a Shape error naming `who` when an input does not broadcast to `out`.
Layout make_layout(const std::vector<int64_t>& out, const std::vector<std::vector<int64_t>>& in,
                   const std::string& who);

struct Instr {
  SegOp op;
  int32_t args[3] = {-1, -1, -1};  // < num_inputs: node input; else result of instr (v - num_inputs)
  bool scalar = false;             // every operand is one broadcast element
  int32_t slot = -1;               // block slot of the result; -1: written to the output
};

struct ProgramCfg {
  int num_inputs = 0;
  std::vector<size_t> in_esize;
  std::vector<bool> in_scalar;  // innermost stride 0
  Layout layout;
  std::vector<Instr> instrs;
  int num_slots = 0;
  size_t out_esize = 4;
  int64_t grain = 16384;
  int64_t lead = 0, lead_elems = 0;  // output leading dim and elements per leading index
  // Set where the program is a chain (every instruction an f32 vector op of the ISA's table on
  // the previous result and at most one node input, the first on a non-broadcast input, the
  // last writing the output): run_program then runs it per segment with the running value in
  // registers, the same operations per element (the same bytes) as the blocks of instructions
  // (but for which of two NaNs a product of them returns: the compiler may commute it).
  ChainFn chain_fn = nullptr;
  std::vector<ChainStep> chain;
  int chain_seed = -1;
};

// Describes one instruction before resolution (node attrs or a FusedOp).
struct InstrSpec {
  OpKind kind;
  std::vector<int32_t> args;
  double alpha = 0, beta = 0;
  DType type;  // result dtype
};

// Builds the program for `specs` over inputs of the given shapes, output `out`.
// Throws Unsupported (naming `who`) when an instruction cannot run on the CPU.
ProgramCfg build_program(const std::vector<InstrSpec>& specs,
                         const std::vector<const Shape*>& in, const Shape& out,
                         const std::string& who, Isa isa);
// Same checks without building: false with a reason.
bool program_supported(const std::vector<InstrSpec>& specs, const std::vector<DType>& in,
                       std::string& why);

// KernelFn running a ProgramCfg. bufs = inputs then the output.
void run_program(const RunCtx& ctx, const void* cfg, void* const* bufs);

}  // namespace rlx::cpu::ew
