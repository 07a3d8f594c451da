// ImageDecoder's codecs: each format through its Debian library, into RGB8 rows; then
// the requested channel order or grayscale (image_decode.h).
#include "io/onnx/image_decode.h"

#include <cstring>
#include <limits>
#include <vector>

#include "rlx/error.h"

#ifdef RLX_HAVE_IMAGE_CODECS
#include <csetjmp>
#include <cstdio>

#include <jpeglib.h>
#include <openjpeg.h>
#include <png.h>
#include <stb/stb_image.h>
#include <tiffio.h>
#include <webp/decode.h>
#endif

namespace rlx::onnx {

namespace {

struct Rgb {
  int64_t w = 0, h = 0;
  std::vector<uint8_t> px;  // h * w * 3
};

// The one size limit of every format, checked before its pixels are allocated: at most
// 2^28 pixels (768 MiB of RGB, far beyond any model input).
bool fits(int64_t w, int64_t h) { return w > 0 && h > 0 && w <= (int64_t(1) << 28) / h; }
[[noreturn]] void too_large(const std::string& where, const char* kind, int64_t w, int64_t h) {
  fail(ErrorCategory::InvalidArgument, where, ": ", kind, " of ", w, " x ", h, " pixels is empty or too large");
}

bool starts(const uint8_t* d, size_t n, const char* magic, size_t m) { return n >= m && std::memcmp(d, magic, m) == 0; }

#ifdef RLX_HAVE_IMAGE_CODECS

// libjpeg reports errors through error_exit, which must not return: jump back out.
struct JpegErr {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char msg[JMSG_LENGTH_MAX];
};

Rgb decode_jpeg(const uint8_t* d, size_t n, const std::string& where) {
  jpeg_decompress_struct cinfo;
  JpegErr err;
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = [](j_common_ptr c) {
    auto* e = reinterpret_cast<JpegErr*>(c->err);
    (*c->err->format_message)(c, e->msg);
    std::longjmp(e->jump, 1);
  };
  err.mgr.output_message = [](j_common_ptr) {};  // warnings stay quiet
  Rgb out;
  std::vector<uint8_t>* px = &out.px;
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    fail(ErrorCategory::InvalidArgument, where, ": JPEG: ", err.msg);
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, d, static_cast<unsigned long>(n));
  jpeg_read_header(&cinfo, TRUE);
  cinfo.out_color_space = JCS_RGB;
  jpeg_start_decompress(&cinfo);
  const int64_t w = cinfo.output_width, h = cinfo.output_height;
  if (!fits(w, h)) {
    jpeg_destroy_decompress(&cinfo);
    too_large(where, "JPEG", w, h);
  }
  px->resize(size_t(w * h * 3));
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = px->data() + size_t(cinfo.output_scanline) * size_t(w) * 3;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  out.w = w, out.h = h;
  return out;
}

Rgb decode_png(const uint8_t* d, size_t n, const std::string& where) {
  png_image img;
  std::memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&img, d, n))
    fail(ErrorCategory::InvalidArgument, where, ": PNG: ", img.message);
  img.format = PNG_FORMAT_RGB;
  Rgb out;
  out.w = img.width, out.h = img.height;
  if (!fits(out.w, out.h)) {
    png_image_free(&img);
    too_large(where, "PNG", out.w, out.h);
  }
  out.px.resize(PNG_IMAGE_SIZE(img));
  if (!png_image_finish_read(&img, nullptr, out.px.data(), 0, nullptr)) {
    const std::string msg = img.message;
    png_image_free(&img);
    fail(ErrorCategory::InvalidArgument, where, ": PNG: ", msg);
  }
  return out;
}

// libtiff reads through these callbacks from memory.
struct TiffMem {
  const uint8_t* d;
  size_t n, at;
};

Rgb decode_tiff(const uint8_t* d, size_t n, const std::string& where) {
  TIFFSetErrorHandler(nullptr);
  TIFFSetWarningHandler(nullptr);
  TiffMem m{d, n, 0};
  TIFF* t = TIFFClientOpen(
      "image", "rm", &m,
      [](thandle_t h, tdata_t buf, tmsize_t size) -> tmsize_t {
        auto* s = static_cast<TiffMem*>(h);
        const size_t k = std::min<size_t>(size_t(size), s->n - s->at);
        std::memcpy(buf, s->d + s->at, k);
        s->at += k;
        return tmsize_t(k);
      },
      [](thandle_t, tdata_t, tmsize_t) -> tmsize_t { return 0; },
      [](thandle_t h, toff_t off, int whence) -> toff_t {
        auto* s = static_cast<TiffMem*>(h);
        const uint64_t base = whence == SEEK_CUR ? s->at : whence == SEEK_END ? s->n : 0;
        if (base + off > s->n) return toff_t(-1);
        s->at = size_t(base + off);
        return s->at;
      },
      [](thandle_t) { return 0; }, [](thandle_t h) -> toff_t { return static_cast<TiffMem*>(h)->n; },
      [](thandle_t, tdata_t*, toff_t*) { return 0; }, [](thandle_t, tdata_t, toff_t) {});
  if (!t) fail(ErrorCategory::InvalidArgument, where, ": TIFF: not a readable TIFF stream");
  uint32_t w = 0, h = 0;
  TIFFGetField(t, TIFFTAG_IMAGEWIDTH, &w);
  TIFFGetField(t, TIFFTAG_IMAGELENGTH, &h);
  if (!fits(w, h)) {
    TIFFClose(t);
    too_large(where, "TIFF", w, h);
  }
  std::vector<uint32_t> rgba(size_t(w) * h);
  const int ok = TIFFReadRGBAImageOriented(t, w, h, rgba.data(), ORIENTATION_TOPLEFT, 0);
  TIFFClose(t);
  if (!ok) fail(ErrorCategory::InvalidArgument, where, ": TIFF: the image could not be decoded");
  Rgb out;
  out.w = w, out.h = h;
  out.px.resize(size_t(w) * h * 3);
  for (size_t i = 0; i < rgba.size(); ++i) {
    out.px[3 * i] = uint8_t(TIFFGetR(rgba[i]));
    out.px[3 * i + 1] = uint8_t(TIFFGetG(rgba[i]));
    out.px[3 * i + 2] = uint8_t(TIFFGetB(rgba[i]));
  }
  return out;
}

Rgb decode_webp(const uint8_t* d, size_t n, const std::string& where) {
  int w = 0, h = 0;
  if (!WebPGetInfo(d, n, &w, &h)) fail(ErrorCategory::InvalidArgument, where, ": WebP: not a decodable WebP stream");
  if (!fits(w, h)) too_large(where, "WebP", w, h);
  uint8_t* p = WebPDecodeRGB(d, n, &w, &h);
  if (!p) fail(ErrorCategory::InvalidArgument, where, ": WebP: the image could not be decoded");
  Rgb out;
  out.w = w, out.h = h;
  out.px.assign(p, p + size_t(w) * size_t(h) * 3);
  WebPFree(p);
  return out;
}

struct J2kMem {
  const uint8_t* d;
  size_t n, at;
};

Rgb decode_j2k(const uint8_t* d, size_t n, bool jp2, const std::string& where) {
  J2kMem m{d, n, 0};
  opj_stream_t* s = opj_stream_create(OPJ_J2K_STREAM_CHUNK_SIZE, OPJ_TRUE);
  opj_stream_set_user_data(s, &m, nullptr);
  opj_stream_set_user_data_length(s, n);
  opj_stream_set_read_function(s, [](void* buf, OPJ_SIZE_T size, void* u) -> OPJ_SIZE_T {
    auto* mm = static_cast<J2kMem*>(u);
    if (mm->at >= mm->n) return OPJ_SIZE_T(-1);
    const size_t k = std::min<size_t>(size, mm->n - mm->at);
    std::memcpy(buf, mm->d + mm->at, k);
    mm->at += k;
    return k;
  });
  opj_stream_set_skip_function(s, [](OPJ_OFF_T off, void* u) -> OPJ_OFF_T {
    auto* mm = static_cast<J2kMem*>(u);
    const int64_t to = std::max<int64_t>(0, std::min<int64_t>(int64_t(mm->at) + off, int64_t(mm->n)));
    const OPJ_OFF_T moved = to - int64_t(mm->at);
    mm->at = size_t(to);
    return moved;
  });
  opj_stream_set_seek_function(s, [](OPJ_OFF_T off, void* u) -> OPJ_BOOL {
    auto* mm = static_cast<J2kMem*>(u);
    if (off < 0 || size_t(off) > mm->n) return OPJ_FALSE;
    mm->at = size_t(off);
    return OPJ_TRUE;
  });
  opj_codec_t* codec = opj_create_decompress(jp2 ? OPJ_CODEC_JP2 : OPJ_CODEC_J2K);
  opj_dparameters_t params;
  opj_set_default_decoder_parameters(&params);
  opj_image_t* img = nullptr;
  const bool ok = opj_setup_decoder(codec, &params) && opj_read_header(s, codec, &img) && opj_decode(codec, s, img) &&
                  opj_end_decompress(codec, s);
  opj_stream_destroy(s);
  opj_destroy_codec(codec);
  struct Free {
    opj_image_t* i;
    ~Free() {
      if (i) opj_image_destroy(i);
    }
  } guard{img};
  if (!ok || !img) fail(ErrorCategory::InvalidArgument, where, ": JPEG 2000: the image could not be decoded");
  if (img->numcomps < 1) fail(ErrorCategory::InvalidArgument, where, ": JPEG 2000: no components");
  const opj_image_comp_t& c0 = img->comps[0];
  const int64_t w = c0.w, h = c0.h;
  if (!fits(w, h)) too_large(where, "JPEG 2000", w, h);
  const int nc = img->numcomps >= 3 ? 3 : 1;
  for (int c = 0; c < nc; ++c)
    if (img->comps[c].w != c0.w || img->comps[c].h != c0.h || img->comps[c].prec != 8 || img->comps[c].sgnd)
      fail(ErrorCategory::Unsupported, where, ": JPEG 2000 with subsampled or other than 8-bit unsigned components");
  Rgb out;
  out.w = w, out.h = h;
  out.px.resize(size_t(w * h * 3));
  for (int64_t i = 0; i < w * h; ++i)
    for (int c = 0; c < 3; ++c) out.px[size_t(3 * i + c)] = uint8_t(img->comps[nc == 3 ? c : 0].data[i]);
  return out;
}

Rgb decode_stb(const uint8_t* d, size_t n, const char* kind, const std::string& where) {
  if (n > size_t(std::numeric_limits<int>::max())) fail(ErrorCategory::InvalidArgument, where, ": ", kind, " too large");
  int w = 0, h = 0, comp = 0;
  if (!stbi_info_from_memory(d, int(n), &w, &h, &comp))
    fail(ErrorCategory::InvalidArgument, where, ": ", kind, ": not a decodable stream");
  if (!fits(w, h)) too_large(where, kind, w, h);
  if (stbi_is_16_bit_from_memory(d, int(n)))
    fail(ErrorCategory::Unsupported, where, ": ", kind, " with 16-bit samples");
  uint8_t* p = stbi_load_from_memory(d, int(n), &w, &h, &comp, 3);
  if (!p) fail(ErrorCategory::InvalidArgument, where, ": ", kind, ": ", stbi_failure_reason());
  Rgb out;
  out.w = w, out.h = h;
  out.px.assign(p, p + size_t(w) * size_t(h) * 3);
  stbi_image_free(p);
  return out;
}

#endif  // RLX_HAVE_IMAGE_CODECS

}  // namespace

HostTensor decode_image(const uint8_t* d, size_t n, PixelFormat format, const std::string& where) {
  const char* kind = starts(d, n, "\xFF\xD8\xFF", 3)                          ? "JPEG"
                     : starts(d, n, "\x89PNG\r\n\x1A\n", 8)                    ? "PNG"
                     : starts(d, n, "II*\0", 4) || starts(d, n, "MM\0*", 4)    ? "TIFF"
                     : starts(d, n, "RIFF", 4) && n >= 12 && !std::memcmp(d + 8, "WEBP", 4) ? "WebP"
                     : starts(d, n, "\xFF\x4F\xFF\x51", 4)                     ? "J2K"
                     : starts(d, n, "\0\0\0\x0CjP  \r\n\x87\n", 12)            ? "JP2"
                     : starts(d, n, "BM", 2)                                   ? "BMP"
                     : n >= 2 && d[0] == 'P' && d[1] >= '1' && d[1] <= '6'    ? "PNM"
                                                                               : nullptr;
  if (!kind) fail(ErrorCategory::InvalidArgument, where, ": the data is not an image of a known format (", n, " bytes)");
#ifndef RLX_HAVE_IMAGE_CODECS
  fail(ErrorCategory::Unsupported, where, ": this build of rlx has no image codec libraries (", kind, ")");
#else
  const std::string k = kind;
  Rgb img = k == "JPEG"  ? decode_jpeg(d, n, where)
            : k == "PNG"  ? decode_png(d, n, where)
            : k == "TIFF" ? decode_tiff(d, n, where)
            : k == "WebP" ? decode_webp(d, n, where)
            : k == "J2K" || k == "JP2" ? decode_j2k(d, n, k == "JP2", where)
                                       : decode_stb(d, n, kind, where);
  HostTensor t;
  t.dtype = DType::U8;
  t.onnx_type = kUint8;
  const int64_t px = img.w * img.h;
  if (format == PixelFormat::Grayscale) {
    t.dims = {img.h, img.w, 1};
    t.bytes.resize(size_t(px));
    for (int64_t i = 0; i < px; ++i) {
      const uint8_t* p = img.px.data() + 3 * i;
      t.bytes[size_t(i)] = uint8_t((p[0] * 19595u + p[1] * 38470u + p[2] * 7471u + 0x8000u) >> 16);
    }
    return t;
  }
  t.dims = {img.h, img.w, 3};
  if (format == PixelFormat::Bgr)
    for (int64_t i = 0; i < px; ++i) std::swap(img.px[size_t(3 * i)], img.px[size_t(3 * i + 2)]);
  t.bytes = std::move(img.px);
  return t;
#endif
}

}  // namespace rlx::onnx
