// ImageDecoder: a PNG written here (lossless, so the pixels are known exactly) decoded by a
// model through OnnxRunner, in RGB, BGR and grayscale; its output shape depends on the
// bytes, so the node runs on the host between compiled segments and static ops after it
// (a Cast and a ReduceSum) see the decoded shape. Bad streams are named errors. The node
// suite compares every format (JPEG, PNG, TIFF, WebP, JPEG 2000, BMP, PNM) with the
// reference's decoded pixels.
#include <png.h>

#include "onnx_test_util.h"
#include "rlx/onnx.h"

namespace rlx::onnx {
namespace {

using namespace test;

std::vector<uint8_t> png_of(int w, int h, const std::vector<uint8_t>& rgb) {
  png_image img;
  std::memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  img.width = uint32_t(w);
  img.height = uint32_t(h);
  img.format = PNG_FORMAT_RGB;
  png_alloc_size_t size = 0;
  EXPECT_TRUE(png_image_write_to_memory(&img, nullptr, &size, 0, rgb.data(), 0, nullptr));
  std::vector<uint8_t> out(size);
  EXPECT_TRUE(png_image_write_to_memory(&img, out.data(), &size, 0, rgb.data(), 0, nullptr));
  out.resize(size);
  return out;
}

// pixels = ImageDecoder(bytes); total = ReduceSum(Cast(pixels, float)).
OnnxRunner decoder(const std::string& format) {
  auto m = make_model(20);
  add_input(m, "bytes", 2, {-1}, "n");
  auto* n = add_node(m, "ImageDecoder", {"bytes"}, {"pixels"}, "decode");
  set_str_attr(n, "pixel_format", format);
  set_int_attr(add_node(m, "Cast", {"pixels"}, {"f"}), "to", 1);
  set_int_attr(add_node(m, "ReduceSum", {"f"}, {"total"}), "keepdims", 0);
  add_output(m, "pixels", 2);
  add_output(m, "total", 1);
  std::string b = bytes_of(m);
  return OnnxRunner(load_onnx_bytes(b.data(), b.size(), "decode.onnx"));
}

TEST(OnnxImageDecoder, PngInEveryPixelFormat) {
  const int w = 5, h = 3;
  std::vector<uint8_t> rgb(size_t(w * h * 3));
  for (size_t i = 0; i < rgb.size(); ++i) rgb[i] = uint8_t((i * 37 + 11) % 256);
  const std::vector<uint8_t> png = png_of(w, h, rgb);
  const TypedTensor in{DType::U8, {int64_t(png.size())}, png};
  for (const char* f : {"RGB", "BGR", "Grayscale"}) {
    OnnxRunner r = decoder(f);
    auto out = r.run({{"bytes", in}});
    ASSERT_EQ(out.size(), 2u);
    std::vector<uint8_t> want;
    double sum = 0;
    for (int i = 0; i < w * h; ++i) {
      const uint8_t* p = &rgb[size_t(3 * i)];
      if (std::string(f) == "RGB") want.insert(want.end(), {p[0], p[1], p[2]});
      if (std::string(f) == "BGR") want.insert(want.end(), {p[2], p[1], p[0]});
      // ITU-R 601-2 luma, 16-bit fixed point rounded (the reference's "L" conversion).
      if (std::string(f) == "Grayscale") want.push_back(uint8_t((p[0] * 19595u + p[1] * 38470u + p[2] * 7471u + 0x8000u) >> 16));
    }
    for (uint8_t v : want) sum += v;
    EXPECT_EQ(out[0].dims, (std::vector<int64_t>{h, w, std::string(f) == "Grayscale" ? 1 : 3})) << f;
    EXPECT_EQ(out[0].bytes, want) << f;
    EXPECT_EQ(as_f32(out[1].bytes).at(0), float(sum)) << f;  // integers below 2^24: exact in f32
  }
}

TEST(OnnxImageDecoder, BadStreamsAreNamedErrors) {
  OnnxRunner r = decoder("RGB");
  const std::vector<uint8_t> junk = {1, 2, 3, 4, 5, 6, 7, 8};
  Error e = expect_error([&] { r.run({{"bytes", TypedTensor{DType::U8, {8}, junk}}}); }, ErrorCategory::InvalidArgument);
  EXPECT_NE(std::string(e.what()).find("'decode'"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("known format"), std::string::npos) << e.what();
  std::vector<uint8_t> png = png_of(4, 4, std::vector<uint8_t>(48, 200));
  png.resize(png.size() / 2);  // truncated
  e = expect_error([&] { r.run({{"bytes", TypedTensor{DType::U8, {int64_t(png.size())}, png}}}); },
                   ErrorCategory::InvalidArgument);
  EXPECT_NE(std::string(e.what()).find("PNG"), std::string::npos) << e.what();
  // The runner stays usable.
  const std::vector<uint8_t> ok = png_of(2, 1, {1, 2, 3, 4, 5, 6});
  auto out = r.run({{"bytes", TypedTensor{DType::U8, {int64_t(ok.size())}, ok}}});
  EXPECT_EQ(out[0].bytes, (std::vector<uint8_t>{1, 2, 3, 4, 5, 6}));
}

}  // namespace
}  // namespace rlx::onnx
