// End-to-end cases of dft / idft: complex and real rows, a length with mixed factors and a
// prime one. Tolerance (derived): values in [-1, 1], so S = sum_j |x_j| <= sqrt(2) n; a
// backend computing the products in f32 (the decomposition) errs by at most (n + 4) 2^-24 S
// per element, 3.6e-5 at n = 36 (the CPU's double FFT by far less); the inverse divides
// that by n. atol = (n + 4) * 2^-24 * sqrt(2) * n, no rtol.
#include <cmath>

#include "op_cases.h"

namespace rlx::e2e {
namespace {

using Outs = std::vector<Value>;
using Ins = const std::vector<Value>&;

OpCase dft_case(const std::string& name, std::vector<int64_t> dims, bool inverse) {
  return {name, [=] {
            T x = Rng(uint32_t(900 + dims[dims.size() - 2] + inverse)).tensor(dims);
            const double n = double(dims[dims.size() - 2]);
            const double atol = (n + 4) * 0x1p-24 * std::sqrt(2.0) * n / (inverse ? n : 1.0);
            check_op(name, {x}, [&](Graph& g, Ins in) {
              return Outs{g.add1(inverse ? OpKind::Idft : OpKind::Dft, {in[0]})};
            }, {ref::dft(x, inverse)}, 0, atol);
          }};
}

const bool kSignal = register_cases({
    {OpKind::Dft, dft_case("dft_complex_36", {2, 3, 36, 2}, false)},
    {OpKind::Dft, dft_case("dft_real_prime_31", {4, 31, 1}, false)},
    {OpKind::Idft, dft_case("idft_complex_30", {3, 30, 2}, true)},
    {OpKind::Idft, dft_case("idft_real_16", {2, 16, 1}, true)},
});

}  // namespace
}  // namespace rlx::e2e
