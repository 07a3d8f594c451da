// Dtype conversion at the I/O boundary of a compiled graph.
//
// A Boundary says how a caller's elements ("user" dtype) map onto a slot's elements
// (the dtype the compiled graph stores): `user_group` user elements correspond to
// `slot_group` slot elements. The accepted pairs:
//   - the same dtype: a copy;
//   - real floats among f32, f16, bf16, f64: widened or narrowed (round to nearest even);
//   - complex and f32 lanes: a c64 element is two f32 lanes (re, im); f32 data fed to a
//     c64 or c128 slot is read as interleaved (re, im) pairs; c64 <-> c128 per component;
//   - c128 across an f32 boundary (user c128, slot f32): each c128 element is FOUR f32
//     lanes (re_hi, re_lo, im_hi, im_lo) with hi = float(x) and lo = float(x - hi), so
//     hi + lo (summed in double) gives x back to about 48 significant bits — double-float
//     precision, enough for f32 kernels doing double-float arithmetic. Values beyond the
//     f32 range do not survive (hi is then inf).
//   - lenient (the f32 convenience calls run()/set_param() only): f32 to and from every
//     real dtype; to integers by truncation toward zero, saturating at the type's range
//     (NaN gives 0); to bool by != 0.
// Everything else (e.g. i32 data for an i64 slot in run_typed) is refused.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "rlx/compiled_graph.h"

namespace rlx::runtime {

struct Boundary {
  enum class Kind : uint8_t { Copy, Real, HiLo };
  DType user = DType::F32, slot = DType::F32;
  Kind kind = Kind::Copy;
  int user_group = 1, slot_group = 1;

  // User elements that match `slot_elems` slot elements; nullopt if not a whole number.
  std::optional<size_t> user_elems(size_t slot_elems) const;
};

// The boundary between `user` and `slot`, or nullopt when the pair does not convert.
std::optional<Boundary> find_boundary(DType user, DType slot, bool lenient);
// Same, but throws Error(InvalidArgument) "<what> is <slot>, got <user>" on refusal.
Boundary boundary_or_throw(DType user, DType slot, bool lenient, const std::string& what);

// Converts `user_elems` caller elements into slot elements, or back.
void to_slot(const Boundary& b, const void* user, void* slot, size_t user_elems);
void to_user(const Boundary& b, const void* slot, void* user, size_t user_elems);

// Elementwise conversion of n real values (any real dtype; saturating into integers).
void convert_reals(DType from, const void* src, DType to, void* dst, size_t n);

// Converts a tensor to dtype `to`: as a slot read back as `to` when that pair converts
// (to_user), else as user data fed to a `to` slot (to_slot); strict rules. With unequal
// groups the last dim is scaled: an f32 [n, 4] read as c128 recombines the hi/lo lanes
// into c128 [n, 1]. Throws Error(InvalidArgument) when no boundary exists or the last
// dim does not divide.
TypedTensor convert_tensor(const TypedTensor& t, DType to);

int64_t numel_of(const std::vector<int64_t>& dims);

}  // namespace rlx::runtime
