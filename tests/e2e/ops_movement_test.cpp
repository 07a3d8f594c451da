// End-to-end cases of the data-movement ops: reshape, transpose, slice, concat, split,
// gather, expand, pad, tile. Each also feeds its result to a compute op, so views
// (aliases planned by the memory planner) are read by a real kernel.
#include <cmath>

#include "op_cases.h"

namespace rlx::e2e {
namespace {

using Outs = std::vector<Value>;
using Ins = const std::vector<Value>&;

T negate(const T& x) { return ref::map(x, [](double v) { return -v; }, x.dtype); }

OpCase slice_case(const std::string& name, std::vector<int64_t> dims, SliceAttrs a) {
  return {name, [=] {
            T x = Rng(uint32_t(dims.size() * 31 + a.starts.size())).tensor(dims);
            T s = ref::slice(x, a);
            check_op(name, {x}, [&](Graph& g, Ins in) {
              Value v = g.add1(OpKind::Slice, {in[0]}, a);
              return Outs{v, g.neg(v)};
            }, {s, negate(s)});
          }};
}

OpCase pad_case(const std::string& name, std::vector<int64_t> pads, PadMode mode, double value) {
  return {name, [=] {
            T x = Rng(uint32_t(pads[0] + 40 + int(mode))).tensor({3, 5, 7});
            check_op(name, {x}, [&](Graph& g, Ins in) { return Outs{g.pad(in[0], pads, mode, value)}; },
                     {ref::pad(x, pads, mode, value)});
          }};
}

const bool kMovement = register_cases({
    {OpKind::Reshape, {"reshape_chain_and_infer", [] {
       T x = Rng(51).tensor({3, 4, 10});
       T r = x;
       r.dims = {12, 10};
       T r2 = x;
       r2.dims = {5, 24};
       check_op("reshape", {x}, [](Graph& g, Ins in) {
         Value a = g.reshape(in[0], {-1, 10});
         Value b = g.reshape(g.exp(a), {5, -1});
         return Outs{a, b, g.reshape(in[0], {5, 24})};
       }, {r, ref::map(r2, [](double v) { return std::exp(v); }, DType::F32), r2}, 5e-6, 5e-7);
     }}},
    {OpKind::Transpose, {"transpose_perms", [] {
       T x = Rng(52).tensor({3, 4, 5, 7});
       check_op("transpose", {x}, [](Graph& g, Ins in) {
         return Outs{g.transpose(in[0], {2, 0, 3, 1}), g.transpose(in[0], {0, 1, 3, 2}),
                     g.neg(g.transpose(in[0], {3, 2, 1, 0}))};
       }, {ref::transpose(x, {2, 0, 3, 1}), ref::transpose(x, {0, 1, 3, 2}), negate(ref::transpose(x, {3, 2, 1, 0}))});
     }}},
    {OpKind::Transpose, {"transpose_large_2d", [] {
       T x = Rng(53).tensor({67, 131});
       check_op("transpose_2d", {x}, [](Graph& g, Ins in) { return Outs{g.transpose(in[0], {1, 0})}; },
                {ref::transpose(x, {1, 0})});
     }}},
    {OpKind::Slice, slice_case("slice_leading_axis", {9, 4, 5}, SliceAttrs{{2}, {7}, {0}, {}})},
    {OpKind::Slice, slice_case("slice_inner_steps", {6, 11, 5}, SliceAttrs{{1, -9}, {100, -1}, {2, 1}, {2, 3}})},
    {OpKind::Slice, slice_case("slice_negative_step", {6, 11, 5}, SliceAttrs{{-2, 9}, {0, -100}, {0, 1}, {-1, -2}})},
    {OpKind::Concat, {"concat_middle_axis", [] {
       Rng rng(54);
       T a = rng.tensor({3, 2, 5}), b = rng.tensor({3, 7, 5}), c = rng.tensor({3, 1, 5});
       check_op("concat", {a, b, c}, [](Graph& g, Ins in) {
         return Outs{g.concat({in[0], in[1], in[2]}, 1), g.concat({in[2], g.neg(in[0])}, -2)};
       }, {ref::concat({a, b, c}, 1), ref::concat({c, negate(a)}, 1)});
     }}},
    {OpKind::Split, {"split_axes", [] {
       T x = Rng(55).tensor({4, 11, 3});
       auto part = [&](int axis, int64_t b, int64_t e) {
         SliceAttrs s{{b}, {e}, {axis}, {}};
         return ref::slice(x, s);
       };
       check_op("split", {x}, [](Graph& g, Ins in) {
         auto p = g.split(in[0], 1, {2, 0, 6, 3});
         auto q = g.split(in[0], 0, {1, 3});
         return Outs{p[0], p[1], g.neg(p[2]), p[3], q[0], q[1]};
       }, {part(1, 0, 2), part(1, 2, 2), negate(part(1, 2, 8)), part(1, 8, 11), part(0, 0, 1), part(0, 1, 4)});
     }}},
    {OpKind::Gather, {"gather_axes_and_negative_indices", [] {
       Rng rng(56);
       T x = rng.tensor({5, 7, 3});
       T i0({2, 3}, {4, 0, -1, 2, 2, -5}, DType::I64);
       T i1({4}, {6, 0, 3, -2}, DType::I32);
       check_op("gather", {x, i0, i1}, [](Graph& g, Ins in) {
         return Outs{g.gather(in[0], in[1], 0), g.gather(in[0], in[2], 1)};
       }, {ref::gather(x, i0, 0), ref::gather(x, i1, 1)});
     }}},
    {OpKind::Expand, {"expand_broadcast", [] {
       T x = Rng(57).tensor({3, 1, 5});
       check_op("expand", {x}, [](Graph& g, Ins in) {
         return Outs{g.expand(in[0], {2, 3, 4, 5}), g.expand(in[0], {1, 5})};
       }, {ref::expand(x, {2, 3, 4, 5}), ref::expand(x, {1, 5})});
     }}},
    {OpKind::Pad, pad_case("pad_constant", {1, 0, 2, 0, 3, 1}, PadMode::Constant, 1.5)},
    {OpKind::Pad, pad_case("pad_constant_crop", {0, -1, 2, 1, 0, -2}, PadMode::Constant, 0)},
    {OpKind::Pad, pad_case("pad_reflect", {1, 2, 3, 2, 4, 6}, PadMode::Reflect, 0)},
    {OpKind::Pad, pad_case("pad_edge", {2, 0, 5, 0, 3, 2}, PadMode::Edge, 0)},
    {OpKind::Tile, {"tile_repeats", [] {
       T x = Rng(58).tensor({2, 3, 5});
       check_op("tile", {x}, [](Graph& g, Ins in) {
         return Outs{g.tile(in[0], {3, 1, 2}), g.tile(in[0], {1, 4, 1})};
       }, {ref::tile(x, {3, 1, 2}), ref::tile(x, {1, 4, 1})});
     }}},
});

}  // namespace
}  // namespace rlx::e2e
