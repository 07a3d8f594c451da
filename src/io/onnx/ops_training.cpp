// Optimizer steps of the ai.onnx.preview.training domain: Adagrad, Momentum (standard and
// Nesterov) and Adam. Each takes the learning rate R and the update count T (scalars),
// then one run of tensors per role (X..., G..., and the state: H..., V..., or V..., H...)
// and gives the new X... and new state, element-wise, by the operators' formulas:
//   Adagrad:  r = R / (1 + T decay);  g = norm X + G;  H' = H + g^2;
//             X' = X - r g / (sqrt(H') + eps)
//   Momentum: g = norm X + G;  b = T > 0 ? beta : 1;  V' = alpha V + b g;
//             X' = X - R V' (standard) or X - R (g + alpha V') (nesterov)
//   Adam:     g = norm X + G;  V' = alpha V + (1 - alpha) g;  H' = beta H + (1 - beta) g^2;
//             r = T > 0 ? R sqrt(1 - beta^T) / (1 - alpha^T) : R;
//             X' = (1 - norm_post) (X - r V' / (sqrt(H') + eps))
// computed in X's type (the reference computes the scalar factors in double: within the
// conformance tolerance).
#include "io/onnx/ops_table.h"

namespace rlx::onnx {

namespace {

// The arithmetic of one step in the optimized tensors' type t (one type for all of them,
// as the operators define), with R and T cast to it once, and T > 0.
struct Step {
  Step(NodeCtx& ctx, DType type)
      : c(ctx), t(type), rate(c.cast(c.in(0), t)), count(c.cast(c.in(1), t)),
        started(c.op(OpKind::Greater, {c.in(1), c.scalar(0, c.dtype(1))})) {}
  NodeCtx& c;
  DType t;
  Value rate, count, started;  // R and T as t; T > 0
  Value add(Value a, Value b) const { return c.op(OpKind::Add, {a, b}); }
  Value sub(Value a, Value b) const { return c.op(OpKind::Sub, {a, b}); }
  Value mul(Value a, Value b) const { return c.op(OpKind::Mul, {a, b}); }
  Value div(Value a, Value b) const { return c.op(OpKind::Div, {a, b}); }
  Value sqrt(Value a) const { return c.op(OpKind::Sqrt, {a}); }
  Value k(double v) const { return c.scalar(v, t); }
};

// The number of optimized tensors: inputs are R, T and `roles` runs of that many, each
// run's tensors of their X's shape; R and T scalars (or one element).
int64_t tensors(NodeCtx& c, int roles) {
  const int rest = c.num_inputs() - 2;
  if (rest <= 0 || rest % roles)
    c.invalid("takes R, T and ", roles, " inputs per optimized tensor, got ", c.num_inputs(), " inputs");
  for (int i = 0; i < 2; ++i)
    if (c.type(i).numel() != 1) c.invalid(i ? "T" : "R", " must be a scalar, got ", c.type(i).str());
  if (!is_float(c.dtype(0))) c.invalid("R must be a float, got ", dtype_name(c.dtype(0)));
  if (is_float(c.dtype(1)) || c.dtype(1) == DType::Bool) c.invalid("T must be an integer, got ", dtype_name(c.dtype(1)));
  const int64_t n = rest / roles;
  for (int64_t i = 0; i < n; ++i)
    for (int r = 1; r < roles; ++r) {
      const int a = int(2 + i), b = int(2 + r * n + i);
      if (!(c.type(b) == c.type(a)))
        c.invalid("input ", b, " is ", c.type(b).str(), " but the tensor it belongs to (input ", a, ") is ",
                  c.type(a).str());
    }
  for (int64_t i = 0; i < n; ++i)
    if (!is_float(c.dtype(int(2 + i))) || c.dtype(int(2 + i)) != c.dtype(2))
      c.invalid("optimized tensors must be floats of one type, input ", 2 + i, " is ", dtype_name(c.dtype(int(2 + i))),
                " and input 2 ", dtype_name(c.dtype(2)));
  return n;
}

// norm * X + G
Value regularized(const Step& s, Value x, Value g, double norm) { return norm == 0 ? g : s.add(s.mul(s.k(norm), x), g); }

}  // namespace

std::vector<Value> lower_adagrad(NodeCtx& c) {
  const int64_t n = tensors(c, 3);
  const double decay = c.attr_float("decay_factor", 0), eps = c.attr_float("epsilon", 0),
               norm = c.attr_float("norm_coefficient", 0);
  std::vector<Value> xs, hs;
  const Step s(c, c.dtype(2));
  const Value r = s.div(s.rate, s.add(s.k(1), s.mul(s.count, s.k(decay))));  // one rate for every tensor
  for (int64_t i = 0; i < n; ++i) {
    Value x = c.in(int(2 + i)), g = c.in(int(2 + n + i)), h = c.in(int(2 + 2 * n + i));
    Value gr = regularized(s, x, g, norm);
    Value hn = s.add(h, s.mul(gr, gr));
    xs.push_back(s.sub(x, s.div(s.mul(r, gr), s.add(s.sqrt(hn), s.k(eps)))));
    hs.push_back(hn);
  }
  xs.insert(xs.end(), hs.begin(), hs.end());
  return xs;
}

std::vector<Value> lower_momentum(NodeCtx& c) {
  const int64_t n = tensors(c, 3);
  for (const char* a : {"alpha", "beta", "norm_coefficient", "mode"})
    if (!c.has_attr(a)) c.invalid("needs the attribute '", a, "'");
  const double alpha = c.attr_float("alpha", 0), beta = c.attr_float("beta", 0),
               norm = c.attr_float("norm_coefficient", 0);
  const std::string mode = c.attr_str("mode", "");
  if (mode != "standard" && mode != "nesterov") c.invalid("mode '", mode, "' is neither 'standard' nor 'nesterov'");
  std::vector<Value> xs, vs;
  const Step s(c, c.dtype(2));
  const Value b = c.op(OpKind::Where, {s.started, s.k(beta), s.k(1)});
  for (int64_t i = 0; i < n; ++i) {
    Value x = c.in(int(2 + i)), g = c.in(int(2 + n + i)), v = c.in(int(2 + 2 * n + i));
    Value gr = regularized(s, x, g, norm);
    Value vn = s.add(s.mul(s.k(alpha), v), s.mul(b, gr));
    Value step = mode == "standard" ? vn : s.add(gr, s.mul(s.k(alpha), vn));
    xs.push_back(s.sub(x, s.mul(s.rate, step)));
    vs.push_back(vn);
  }
  xs.insert(xs.end(), vs.begin(), vs.end());
  return xs;
}

std::vector<Value> lower_adam(NodeCtx& c) {
  const int64_t n = tensors(c, 4);
  const double alpha = c.attr_float("alpha", 0.9), beta = c.attr_float("beta", 0.999),
               eps = c.attr_float("epsilon", 0), norm = c.attr_float("norm_coefficient", 0),
               post = c.attr_float("norm_coefficient_post", 0);
  std::vector<Value> xs, vs, hs;
  const Step s(c, c.dtype(2));
  // The bias-corrected rate: one per step, shared by every tensor.
  const Value corrected = s.div(s.mul(s.rate, s.sqrt(s.sub(s.k(1), c.op(OpKind::Pow, {s.k(beta), s.count})))),
                                s.sub(s.k(1), c.op(OpKind::Pow, {s.k(alpha), s.count})));
  const Value r = c.op(OpKind::Where, {s.started, corrected, s.rate});
  for (int64_t i = 0; i < n; ++i) {
    Value x = c.in(int(2 + i)), g = c.in(int(2 + n + i)), v = c.in(int(2 + 2 * n + i)), h = c.in(int(2 + 3 * n + i));
    Value gr = regularized(s, x, g, norm);
    Value vn = s.add(s.mul(s.k(alpha), v), s.mul(s.k(1 - alpha), gr));
    Value hn = s.add(s.mul(s.k(beta), h), s.mul(s.k(1 - beta), s.mul(gr, gr)));
    Value hs_ = s.add(s.sqrt(hn), s.k(eps));
    Value xn = s.sub(x, s.mul(r, s.div(vn, hs_)));
    xs.push_back(post == 0 ? xn : s.mul(s.k(1 - post), xn));
    vs.push_back(vn);
    hs.push_back(hn);
  }
  xs.insert(xs.end(), vs.begin(), vs.end());
  xs.insert(xs.end(), hs.begin(), hs.end());
  return xs;
}

}  // namespace rlx::onnx
