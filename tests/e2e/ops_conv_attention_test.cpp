// End-to-end cases of conv2d, the pools, attention (GQA, causal, additive mask, Sk > Sq)
// and rotary (both pair layouts, partial rotation).
#include <cmath>

#include "e2e_interp.h"
#include "op_cases.h"

namespace rlx::e2e {
namespace {

using Outs = std::vector<Value>;
using Ins = const std::vector<Value>&;

OpCase conv_case(const std::string& name, std::vector<int64_t> xd, std::vector<int64_t> wd, ConvAttrs a,
                 bool bias) {
  return {name, [=] {
            Rng rng(uint32_t(400 + xd[1] * 7 + wd[2] + a.group));
            T x = rng.tensor(xd), w = rng.tensor(wd, -0.5, 0.5), b = rng.tensor({wd[0]});
            std::vector<T> ins{x, w};
            if (bias) ins.push_back(b);
            check_op(name, ins, [&](Graph& g, Ins in) {
              return Outs{g.conv2d(in[0], in[1], bias ? in[2] : Value{}, a.strides, a.pads, a.dilations, a.group)};
            }, {ref::conv2d(x, w, bias ? &b : nullptr, a)}, 2e-5, 2e-6);
          }};
}

// fused_conv2d: act(conv + bias + residual), against the reference conv then the same steps.
OpCase fused_conv_case(const std::string& name, std::vector<int64_t> xd, std::vector<int64_t> wd, FusedConvAttrs a,
                       bool bias, bool residual) {
  return {name, [=] {
            Rng rng(uint32_t(450 + xd[1] * 7 + wd[2] + a.group + residual));
            T x = rng.tensor(xd), w = rng.tensor(wd, -0.5, 0.5), b = rng.tensor({wd[0]});
            T y = ref::conv2d(x, w, bias ? &b : nullptr, a.conv());
            T r = rng.tensor(y.dims);
            std::vector<T> ins{x, w, b, r};
            if (residual) y = ref::binary(y, r, std::plus<double>(), DType::F32);
            check_op(name, ins, [&](Graph& g, Ins in) {
              return Outs{g.fused_conv2d(in[0], in[1], bias ? in[2] : Value{}, residual ? in[3] : Value{}, a)};
            }, {interp_detail::act(y, a.activation, a.alpha)}, 2e-5, 2e-6);
          }};
}

FusedConvAttrs fused_attrs(ConvAttrs c, Activation act, double alpha = 0) {
  FusedConvAttrs a;
  a.strides = c.strides, a.pads = c.pads, a.dilations = c.dilations, a.group = c.group;
  a.activation = act, a.alpha = alpha;
  return a;
}

// u8/i8 inputs and weights over their whole ranges, a scalar or per-channel weight zero point.
OpCase conv_integer_case(const std::string& name, DType xt, DType wt, bool per_channel, ConvAttrs a) {
  return {name, [=] {
            Rng rng(uint32_t(700 + int(xt) * 3 + int(wt) + per_channel));
            auto range = [](DType t) { return t == DType::U8 ? std::pair{0.0, 255.0} : std::pair{-128.0, 127.0}; };
            auto ints = [&](std::vector<int64_t> d, DType t) {
              T v = rng.tensor(std::move(d), range(t).first, range(t).second, t);
              for (double& e : v.v) e = std::round(e);
              return v;
            };
            T x = ints({2, 4, 9, 8}, xt), w = ints({6, 2, 3, 3}, wt), xz = ints({}, xt), wz = ints({per_channel ? 6 : 1}, wt);
            check_op(name, {x, w, xz, wz}, [&](Graph& g, Ins in) {
              return Outs{g.add1(OpKind::ConvInteger, {in[0], in[1], in[2], in[3]}, a)};
            }, {ref::conv_integer(x, w, xz, wz, a)}, 0, 0);
          }};
}

OpCase pool_case(const std::string& name, bool is_max, PoolAttrs a) {
  return {name, [=] {
            T x = Rng(uint32_t(500 + a.kernel[0] * 5 + a.ceil_mode)).tensor({2, 3, 11, 13}, -3, 3);
            check_op(name, {x}, [&](Graph& g, Ins in) {
              return Outs{g.add1(is_max ? OpKind::MaxPool2d : OpKind::AvgPool2d, {in[0]}, a)};
            }, {ref::pool2d(x, a, is_max)}, 2e-6, 1e-7);
          }};
}

PoolAttrs pool_attrs(std::vector<int64_t> k, std::vector<int64_t> s, std::vector<int64_t> p,
                     std::vector<int64_t> d = {1, 1}, bool ceil = false, bool include_pad = false) {
  PoolAttrs a;
  a.kernel = k, a.strides = s, a.pads = p, a.dilations = d, a.ceil_mode = ceil, a.count_include_pad = include_pad;
  return a;
}

struct AttnShape {
  int64_t b, hq, hkv, sq, sk, d, dv;
};

OpCase attention_case(const std::string& name, AttnShape s, bool causal, int mask_rank, double scale) {
  return {name, [=] {
            Rng rng(uint32_t(600 + s.sq * 3 + s.sk + causal * 101 + mask_rank));
            T q = rng.tensor({s.b, s.hq, s.sq, s.d}, -1.5, 1.5), k = rng.tensor({s.b, s.hkv, s.sk, s.d}, -1.5, 1.5);
            T v = rng.tensor({s.b, s.hkv, s.sk, s.dv});
            const std::vector<int64_t> md = mask_rank == 2   ? std::vector<int64_t>{s.sq, s.sk}
                                            : mask_rank == 4 ? std::vector<int64_t>{s.b, 1, s.sq, s.sk}
                                                             : std::vector<int64_t>{1};
            T m = rng.tensor(md, -2, 0.5);
            // Some fully masked-out keys (but never a whole row).
            if (!md.empty())
              for (size_t i = 1; i < m.v.size(); i += 5) m.v[i] = -INFINITY;
            std::vector<T> ins{q, k, v};
            if (!md.empty()) ins.push_back(m);
            T want = ref::attention(q, k, v, md.empty() ? nullptr : &m, causal, scale);
            check_op(name, ins, [&](Graph& g, Ins in) {
              return Outs{g.attention(in[0], in[1], in[2], md.empty() ? Value{} : in[3], causal, scale)};
            }, {want}, 5e-5, 5e-6);
          }};
}

OpCase rotary_case(const std::string& name, bool interleaved, int64_t d, int64_t half) {
  return {name, [=] {
            Rng rng(uint32_t(700 + interleaved * 7 + d + half));
            const int64_t S = 9;
            T x = rng.tensor({2, 3, S, d});
            T c({S, half}), sn({S, half});
            for (int64_t p = 0; p < S; ++p)
              for (int64_t i = 0; i < half; ++i) {
                const double th = double(p) * std::pow(10000.0, -2.0 * double(i) / double(2 * half));
                c.v[size_t(p * half + i)] = double(float(std::cos(th)));
                sn.v[size_t(p * half + i)] = double(float(std::sin(th)));
              }
            check_op(name, {x, c, sn}, [&](Graph& g, Ins in) {
              return Outs{g.rotary(in[0], in[1], in[2], interleaved)};
            }, {ref::rotary(x, c, sn, interleaved)}, 2e-6, 2e-7);
          }};
}

const bool kConv = register_cases({
    {OpKind::Conv2d, conv_case("conv2d_3x3_pad_bias", {2, 5, 9, 11}, {7, 5, 3, 3}, ConvAttrs{{1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
                               true)},
    {OpKind::Conv2d, conv_case("conv2d_stride_dilation_asym_pad", {1, 4, 13, 10}, {6, 4, 3, 2},
                               ConvAttrs{{2, 3}, {0, 2, 1, 0}, {2, 1}, 1}, false)},
    {OpKind::Conv2d, conv_case("conv2d_grouped", {2, 6, 8, 7}, {9, 2, 3, 3}, ConvAttrs{{1, 2}, {1, 1, 1, 1}, {1, 1}, 3},
                               true)},
    {OpKind::Conv2d, conv_case("conv2d_depthwise", {1, 8, 10, 9}, {8, 1, 5, 5}, ConvAttrs{{1, 1}, {2, 2, 2, 2}, {1, 1}, 8},
                               true)},
    {OpKind::Conv2d, conv_case("conv2d_pointwise", {2, 19, 6, 5}, {23, 19, 1, 1}, ConvAttrs{}, true)},
    {OpKind::FusedConv2d, fused_conv_case("fused_conv2d_residual_relu", {2, 5, 9, 11}, {7, 5, 3, 3},
                                          fused_attrs(ConvAttrs{{1, 1}, {1, 1, 1, 1}, {1, 1}, 1}, Activation::Relu),
                                          true, true)},
    {OpKind::FusedConv2d, fused_conv_case("fused_conv2d_strided_leaky_no_bias", {1, 4, 13, 10}, {6, 4, 3, 2},
                                          fused_attrs(ConvAttrs{{2, 3}, {0, 2, 1, 0}, {2, 1}, 1},
                                                      Activation::LeakyRelu, 0.25),
                                          false, false)},
    {OpKind::FusedConv2d, fused_conv_case("fused_conv2d_depthwise_residual_sigmoid", {1, 8, 10, 9}, {8, 1, 5, 5},
                                          fused_attrs(ConvAttrs{{1, 1}, {2, 2, 2, 2}, {1, 1}, 8}, Activation::Sigmoid),
                                          true, true)},
    {OpKind::ConvInteger, conv_integer_case("conv_integer_u8_s8_grouped_pad", DType::U8, DType::I8, false,
                                            ConvAttrs{{1, 2}, {1, 0, 1, 2}, {1, 1}, 2})},
    {OpKind::ConvInteger, conv_integer_case("conv_integer_s8_u8_per_channel_dilated", DType::I8, DType::U8, true,
                                            ConvAttrs{{2, 1}, {0, 1, 0, 1}, {2, 1}, 2})},
    {OpKind::MaxPool2d, pool_case("max_pool_2x2", true, pool_attrs({2, 2}, {2, 2}, {0, 0, 0, 0}))},
    {OpKind::MaxPool2d, pool_case("max_pool_3x3_pad_ceil", true, pool_attrs({3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, true))},
    {OpKind::MaxPool2d, pool_case("max_pool_dilated", true, pool_attrs({2, 3}, {1, 2}, {1, 0, 0, 1}, {2, 2}))},
    {OpKind::AvgPool2d, pool_case("avg_pool_exclude_pad", false, pool_attrs({3, 3}, {2, 2}, {1, 1, 1, 1}))},
    {OpKind::AvgPool2d, pool_case("avg_pool_include_pad", false, pool_attrs({3, 2}, {2, 1}, {1, 1, 0, 1}, {1, 1}, false, true))},
    {OpKind::AvgPool2d, pool_case("avg_pool_ceil_include_pad", false,
                                  pool_attrs({3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, true, true))},
    {OpKind::Attention, attention_case("attention_plain", {2, 4, 4, 5, 5, 16, 16}, false, 0, 0)},
    {OpKind::Attention, attention_case("attention_gqa_causal_sk_gt_sq", {2, 6, 2, 3, 11, 8, 12}, true, 0, 0)},
    {OpKind::Attention, attention_case("attention_mask2d_scale", {1, 4, 2, 7, 13, 12, 5}, false, 2, 0.3)},
    {OpKind::Attention, attention_case("attention_mask4d_causal_gqa", {2, 4, 1, 6, 9, 8, 8}, true, 4, 0)},
    {OpKind::Attention, attention_case("attention_long_keys", {1, 2, 2, 4, 300, 32, 32}, true, 0, 0)},
    // Packed K/V paths (Sq * group >= 8) with wide and odd head dims, causal cuts
    // inside key blocks, and single-query decode.
    {OpKind::Attention, attention_case("attention_packed_wide_dv", {1, 8, 2, 9, 140, 64, 80}, true, 0, 0)},
    {OpKind::Attention, attention_case("attention_packed_odd_dims", {2, 4, 4, 33, 33, 40, 24}, true, 2, 0)},
    {OpKind::Attention, attention_case("attention_packed_dv_gt_d", {1, 6, 3, 17, 70, 16, 72}, true, 4, 0)},
    {OpKind::Attention, attention_case("attention_decode_one_query", {1, 8, 2, 1, 257, 128, 128}, true, 0, 0)},
    {OpKind::Rotary, rotary_case("rotary_halves_full", false, 16, 8)},
    {OpKind::Rotary, rotary_case("rotary_halves_partial", false, 20, 6)},
    {OpKind::Rotary, rotary_case("rotary_interleaved_full", true, 12, 6)},
    {OpKind::Rotary, rotary_case("rotary_interleaved_partial", true, 22, 5)},
});

}  // namespace
}  // namespace rlx::e2e
