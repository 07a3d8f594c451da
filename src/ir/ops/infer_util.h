// Internal helpers shared by the shape-inference rules in src/ir/ops/*.cpp.
// Every helper reports through ctx.error(...), so messages always name the node.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/op_table.h"

namespace rlx::ir::detail {

// "3" for a static dim, "s2" for symbol 2 (the graph's name is not reachable here).
std::string dim_str(Dim d);
std::string dims_str(const std::vector<Dim>& dims);
std::string ints_str(const std::vector<int64_t>& v);

// Normalizes a possibly negative axis against rank; `what` names the attribute.
int norm_axis(const InferCtx& ctx, int64_t axis, int rank, const char* what);
// Normalizes a list of axes; rejects duplicates.
std::vector<int> norm_axes(const InferCtx& ctx, const std::vector<int64_t>& axes, int rank, const char* what);

// Numpy broadcasting. A symbolic dim broadcasts only with 1 or the same symbol.
std::vector<Dim> broadcast(const InferCtx& ctx, const std::vector<Dim>& a, const std::vector<Dim>& b);
// True when `small` numpy-broadcasts to exactly `target` (target unchanged).
bool broadcasts_to(const std::vector<Dim>& small, const std::vector<Dim>& target);

// dtype checks; `what` names the operand, e.g. "input 0".
void require_float(const InferCtx& ctx, const Shape& s, const char* what);
void require_not_bool(const InferCtx& ctx, const Shape& s, const char* what);
void require_real(const InferCtx& ctx, const Shape& s, const char* what);  // not complex
void require_index(const InferCtx& ctx, const Shape& s, const char* what);  // I32 or I64
void require_same_dtype(const InferCtx& ctx, const Shape& a, const char* what_a, const Shape& b,
                        const char* what_b);
void require_rank(const InferCtx& ctx, const Shape& s, int rank, const char* what);
// Checks the op's kFloatOnly trait against input 0.
void check_float_only(const InferCtx& ctx);

// Requires a static dim; the message says the symbol must be bound first.
int64_t static_dim(const InferCtx& ctx, Dim d, const char* what);
// Requires an attribute vector of exactly n entries.
void require_len(const InferCtx& ctx, const std::vector<int64_t>& v, size_t n, const char* what);

// Error unless the two dims are the same (static size or symbol), naming both.
void require_same_dim(const InferCtx& ctx, Dim a, const char* what_a, Dim b, const char* what_b);

}  // namespace rlx::ir::detail
