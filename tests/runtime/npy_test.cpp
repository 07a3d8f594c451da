// .npy reading and writing: every dtype round-trips, files NumPy writes are read
// (v1/v2/v3 headers, big-endian), malformed files give clear errors.
#include <filesystem>
#include <random>

#include "runtime/npy.h"
#include "runtime/typed_io.h"
#include "runtime_test_util.h"

namespace rlx::test {
namespace {

using runtime::encode_npy;
using runtime::parse_npy;

// Builds an npy file the way NumPy lays it out, with a header of our choosing.
std::vector<uint8_t> npy_file(const std::string& dict, const std::vector<uint8_t>& data, int major = 1) {
  std::vector<uint8_t> f{0x93, 'N', 'U', 'M', 'P', 'Y', uint8_t(major), 0};
  const size_t pre = major == 1 ? 10 : 12;
  std::string h = dict;
  while ((pre + h.size() + 1) % 64) h += ' ';
  h += '\n';
  for (size_t i = 0; i < pre - 8; ++i) f.push_back(uint8_t(h.size() >> (8 * i)));
  f.insert(f.end(), h.begin(), h.end());
  f.insert(f.end(), data.begin(), data.end());
  return f;
}

TEST(Npy, EveryDtypeRoundTrips) {
  std::mt19937 rng(7);
  const std::vector<std::vector<int64_t>> shapes{{}, {0}, {5}, {2, 3}, {2, 1, 3}};
  for (int d = 0; d < kNumDTypes; ++d) {
    for (const auto& dims : shapes) {
      TypedTensor t;
      t.dtype = DType(d);
      t.dims = dims;
      t.bytes.resize(size_t(runtime::numel_of(dims)) * dtype_size(t.dtype));
      for (auto& b : t.bytes) b = uint8_t(rng());
      std::vector<uint8_t> file = encode_npy(t);
      EXPECT_EQ(file[6], 1);                      // version 1.0
      const size_t header = 10 + (file[8] | (file[9] << 8));
      EXPECT_EQ(header % 64, 0u);                  // data aligned as NumPy does
      EXPECT_EQ(file[header - 1], '\n');
      TypedTensor back = parse_npy(file, "mem");
      EXPECT_EQ(back.dtype, t.dtype);
      EXPECT_EQ(back.dims, t.dims);
      EXPECT_EQ(back.bytes, t.bytes);
    }
  }
}

TEST(Npy, HeaderTextMatchesNumpy) {
  TypedTensor t{DType::F32, {2, 3}, std::vector<uint8_t>(24)};
  std::vector<uint8_t> f = encode_npy(t);
  std::string text(f.begin() + 10, f.begin() + 10 + (f[8] | (f[9] << 8)));
  EXPECT_EQ(text.rfind("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 0), 0u) << text;
  TypedTensor v{DType::Bool, {4}, std::vector<uint8_t>(4)};
  f = encode_npy(v);
  text.assign(f.begin() + 10, f.begin() + 10 + (f[8] | (f[9] << 8)));
  EXPECT_NE(text.find("'|b1'"), std::string::npos);
  EXPECT_NE(text.find("(4,)"), std::string::npos);
  EXPECT_EQ(runtime::npy_descr(DType::C128), "<c16");
  EXPECT_EQ(runtime::npy_descr(DType::BF16), "<V2");
  EXPECT_EQ(runtime::npy_descr(DType::U8), "|u1");
}

TEST(Npy, ReadsNumpyVariants) {
  std::vector<int32_t> v{1, -2, 3};
  // Double quotes, keys in another order, no trailing comma.
  auto t = parse_npy(npy_file("{\"shape\": (3,), \"fortran_order\": False, \"descr\": \"<i4\"}", pack(v)));
  EXPECT_EQ(t.dtype, DType::I32);
  EXPECT_EQ(unpack<int32_t>(t.bytes), v);
  // Versions 2.0 and 3.0 use a 4-byte header length.
  for (int major : {2, 3}) {
    auto t2 = parse_npy(npy_file("{'descr': '<i4', 'fortran_order': False, 'shape': (1, 3), }", pack(v), major));
    EXPECT_EQ(t2.dims, (std::vector<int64_t>{1, 3}));
    EXPECT_EQ(unpack<int32_t>(t2.bytes), v);
  }
  // Big-endian data is swapped on read (components of complex values separately).
  std::vector<uint8_t> be{0x3F, 0x80, 0x00, 0x00, 0xC0, 0x00, 0x00, 0x00};  // 1.0f, -2.0f
  auto f = parse_npy(npy_file("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", be));
  EXPECT_EQ(unpack<float>(f.bytes), (std::vector<float>{1, -2}));
  auto c = parse_npy(npy_file("{'descr': '>c8', 'fortran_order': False, 'shape': (1,), }", be));
  EXPECT_EQ(c.dtype, DType::C64);
  EXPECT_EQ(unpack<float>(c.bytes), (std::vector<float>{1, -2}));
  // Fortran order is the same as C order for rank <= 1.
  auto one = parse_npy(npy_file("{'descr': '<i4', 'fortran_order': True, 'shape': (3,), }", pack(v)));
  EXPECT_EQ(unpack<int32_t>(one.bytes), v);
}

TEST(Npy, LargeHeadersUseVersion2) {
  TypedTensor t{DType::U8, std::vector<int64_t>(25000, 1), {42}};
  std::vector<uint8_t> f = encode_npy(t);
  EXPECT_EQ(f[6], 2);
  TypedTensor back = parse_npy(f);
  EXPECT_EQ(back.dims.size(), 25000u);
  EXPECT_EQ(back.bytes, t.bytes);
}

TEST(Npy, MalformedFilesGiveClearErrors) {
  const std::vector<uint8_t> four(4);
  const std::string ok_dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }";
  expect_error([&] { parse_npy(std::vector<uint8_t>{'P', 'K', 3, 4, 0, 0, 0, 0, 0, 0}, "a.npy"); },
               ErrorCategory::Parse, "a.npy: not an npy file");
  auto truncated = npy_file(ok_dict, four);
  truncated.resize(40);
  expect_error([&] { parse_npy(truncated, "t.npy"); }, ErrorCategory::Parse, "t.npy: npy header claims");
  expect_error([&] { parse_npy(npy_file(ok_dict, std::vector<uint8_t>(3)), "d.npy"); }, ErrorCategory::Parse,
               "data truncated");
  expect_error([&] { parse_npy(npy_file(ok_dict, std::vector<uint8_t>(5)), "x.npy"); }, ErrorCategory::Parse,
               "unexpected bytes");
  expect_error([&] { parse_npy(npy_file("{'descr': '<u2', 'fortran_order': False, 'shape': (2,), }", four)); },
               ErrorCategory::Unsupported, "'<u2'");
  expect_error([&] { parse_npy(npy_file("{'descr': '<f4', 'fortran_order': True, 'shape': (1, 1), }", four)); },
               ErrorCategory::Unsupported, "Fortran");
  expect_error([&] { parse_npy(npy_file("{'descr': '<f4', 'shape': (1,), }", four)); }, ErrorCategory::Parse,
               "fortran_order");
  expect_error([&] { parse_npy(npy_file("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (1,), }", four)); },
               ErrorCategory::Parse, "True or False");
  expect_error([&] { parse_npy(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", four)); },
               ErrorCategory::Parse, "non-negative");
  expect_error([&] { parse_npy(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1,) ", four)); },
               ErrorCategory::Parse, "npy header byte");
  expect_error(
      [&] { parse_npy(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999), }", four)); },
      ErrorCategory::Parse, "");
  expect_error([&] { parse_npy(npy_file(ok_dict, four, 9)); }, ErrorCategory::Unsupported, "version 9");
  expect_error([&] { runtime::read_npy("/nonexistent/dir/file.npy"); }, ErrorCategory::Io, "/nonexistent/dir/file.npy");
  expect_error([&] { encode_npy(TypedTensor{DType::F32, {2}, std::vector<uint8_t>(4)}); },
               ErrorCategory::InvalidArgument, "do not match");
}

TEST(Npy, FileRoundTrip) {
  const std::string dir = testing::TempDir() + "/rlx_npy_test";
  std::filesystem::create_directories(dir);
  TypedTensor t = typed<double>(DType::C128, {2}, {1.5, -2.5, 3.25, 0});
  runtime::write_npy(dir + "/c.npy", t);
  TypedTensor back = runtime::read_npy(dir + "/c.npy");
  EXPECT_EQ(back.dtype, DType::C128);
  EXPECT_EQ(back.dims, t.dims);
  EXPECT_EQ(back.bytes, t.bytes);
  expect_error([&] { runtime::write_npy("/nonexistent/dir/c.npy", t); }, ErrorCategory::Io, "cannot create");
}

// Strings: NumPy's '<U{n}' (UTF-32, NUL-padded) read as UTF-8 and written back the same way;
// '|S{n}' read as bytes; a numeric reader refuses them by name; invalid text is an error.
TEST(Npy, StringArraysRoundTrip) {
  runtime::NpyStrings s{{2, 2}, {"abc", "", "caf\xc3\xa9", "\xf0\x9f\x99\x82x"}};
  const std::vector<uint8_t> file = runtime::encode_npy_strings(s);
  ASSERT_GT(file.size(), 64u);
  const std::string head(file.begin() + 10, file.end() - 4 * 4 * 4);  // 4 elements of 4 UTF-32 units
  EXPECT_NE(head.find("'descr': '<U4'"), std::string::npos) << head;  // longest: 4 code points
  EXPECT_EQ(file.size() % 64, 0u);
  runtime::NpyArray back = runtime::parse_npy_any(file);
  ASSERT_TRUE(back.is_strings);
  EXPECT_EQ(back.text.dims, s.dims);
  EXPECT_EQ(back.text.strings, s.strings);
  expect_error([&] { parse_npy(file); }, ErrorCategory::Unsupported, "holds strings");

  std::vector<uint8_t> bytes_data{'h', 'i', 0, 'x', 'y', 'z'};
  runtime::NpyArray b = runtime::parse_npy_any(npy_file("{'descr': '|S3', 'fortran_order': False, 'shape': (2,), }", bytes_data));
  ASSERT_TRUE(b.is_strings);
  EXPECT_EQ(b.text.strings, (std::vector<std::string>{"hi", "xyz"}));
  // Big-endian UTF-32.
  std::vector<uint8_t> be{0, 0, 0, 'o', 0, 0, 0, 'k'};
  EXPECT_EQ(runtime::parse_npy_any(npy_file("{'descr': '>U2', 'fortran_order': False, 'shape': (), }", be))
                .text.strings,
            (std::vector<std::string>{"ok"}));

  std::vector<uint8_t> bad{0x00, 0xD8, 0, 0};  // a lone surrogate
  expect_error([&] { runtime::parse_npy_any(npy_file("{'descr': '<U1', 'fortran_order': False, 'shape': (1,), }", bad)); },
               ErrorCategory::Parse, "invalid code point");
  expect_error([&] { runtime::parse_npy_any(npy_file("{'descr': '<U2', 'fortran_order': False, 'shape': (1,), }", bad)); },
               ErrorCategory::Parse, "truncated");
  expect_error([&] { runtime::encode_npy_strings({{1}, {"\xff"}}); }, ErrorCategory::InvalidArgument, "UTF-8");
  expect_error([&] { runtime::encode_npy_strings({{3}, {"a"}}); }, ErrorCategory::InvalidArgument, "do not match");
}

}  // namespace
}  // namespace rlx::test
