// Internal: ImageDecoder's host side. Decodes an encoded image (JPEG, PNG, TIFF, WebP,
// JPEG 2000, BMP, PNM: recognized by their leading bytes) with Debian's codec libraries
// (libjpeg-turbo, libpng, libtiff, libwebp, OpenJPEG, stb_image) into 8-bit pixels
// [height, width, 3] in RGB or BGR order, or [height, width, 1] grayscale (from RGB with
// ITU-R 601-2 luma weights in 16-bit fixed point, as Pillow's "L" conversion computes it).
// Errors: Error(InvalidArgument) naming `where` for data no codec recognizes or that fails
// to decode; Error(Unsupported) for a format this build has no library for, or pixels that
// are not 8 bits.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "io/onnx/tensor.h"

namespace rlx::onnx {

enum class PixelFormat { Rgb, Bgr, Grayscale };

HostTensor decode_image(const uint8_t* data, size_t size, PixelFormat format, const std::string& where);

}  // namespace rlx::onnx
