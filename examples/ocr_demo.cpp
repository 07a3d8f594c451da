// PP-OCRv4 text recognition with rlx: reads a PPM image of one line of text, runs the
// recognition model and prints what it read (CTC greedy decoding over ppocr_keys_v1.txt),
// then the compile reports and the latency.
//   rlx_example_ocr_demo REC_MODEL.onnx KEYS.txt IMAGE.ppm [--runs N] [--threads T]
#include <rlx/onnx.h>
#include <rlx/rlx.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Image {
  int w = 0, h = 0;
  std::vector<uint8_t> rgb;  // h * w * 3
};

// Binary PPM (P6, maxval 255): what `convert x.png x.ppm` writes.
Image read_ppm(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw rlx::Error(rlx::ErrorCategory::Io, "cannot open " + path);
  std::string magic;
  int maxval = 0;
  Image img;
  f >> magic;
  auto skip_comments = [&] {
    f >> std::ws;
    while (f.peek() == '#') { std::string line; std::getline(f, line); f >> std::ws; }
  };
  skip_comments(); f >> img.w;
  skip_comments(); f >> img.h;
  skip_comments(); f >> maxval;
  f.get();
  if (magic != "P6" || img.w <= 0 || img.h <= 0 || maxval != 255)
    throw rlx::Error(rlx::ErrorCategory::Parse, path + ": expected a binary 8-bit PPM (P6)");
  img.rgb.resize(size_t(img.w) * img.h * 3);
  if (!f.read(reinterpret_cast<char*>(img.rgb.data()), std::streamsize(img.rgb.size())))
    throw rlx::Error(rlx::ErrorCategory::Parse, path + ": truncated pixel data");
  return img;
}

// PaddleOCR's recognition preprocessing: resize to height 48 keeping the aspect ratio
// (bilinear), scale to [-1, 1], CHW with BGR channel order.
std::vector<float> preprocess(const Image& img, int& out_w) {
  const int H = 48;
  out_w = std::max(1, int(std::ceil(H * double(img.w) / img.h)));
  std::vector<float> chw(size_t(3) * H * out_w);
  double sx = double(img.w) / out_w, sy = double(img.h) / H;
  for (int y = 0; y < H; ++y) {
    double fy = std::clamp((y + 0.5) * sy - 0.5, 0.0, double(img.h - 1));
    int y0 = int(fy), y1 = std::min(y0 + 1, img.h - 1);
    double wy = fy - y0;
    for (int x = 0; x < out_w; ++x) {
      double fx = std::clamp((x + 0.5) * sx - 0.5, 0.0, double(img.w - 1));
      int x0 = int(fx), x1 = std::min(x0 + 1, img.w - 1);
      double wx = fx - x0;
      for (int c = 0; c < 3; ++c) {
        auto px = [&](int yy, int xx) { return double(img.rgb[(size_t(yy) * img.w + xx) * 3 + c]); };
        double v = (1 - wy) * ((1 - wx) * px(y0, x0) + wx * px(y0, x1)) + wy * ((1 - wx) * px(y1, x0) + wx * px(y1, x1));
        int bgr = 2 - c;
        chw[(size_t(bgr) * H + y) * out_w + x] = float((v / 255.0 - 0.5) / 0.5);
      }
    }
  }
  return chw;
}

std::vector<std::string> read_keys(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw rlx::Error(rlx::ErrorCategory::Io, "cannot open " + path);
  std::vector<std::string> keys{""};  // index 0: the CTC blank
  for (std::string line; std::getline(f, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    keys.push_back(line);
  }
  keys.push_back(" ");  // PP-OCR appends the space character last
  return keys;
}

// Greedy CTC: best class per step, collapse repeats, drop blanks.
std::string ctc_decode(const rlx::TypedTensor& probs, const std::vector<std::string>& keys, double& confidence) {
  if (probs.dtype != rlx::DType::F32 || probs.dims.size() != 3)
    throw rlx::Error(rlx::ErrorCategory::InvalidArgument, "expected f32 [1, T, C] probabilities");
  int64_t T = probs.dims[1], C = probs.dims[2];
  if (C != int64_t(keys.size()))
    throw rlx::Error(rlx::ErrorCategory::InvalidArgument,
                     "model has " + std::to_string(C) + " classes, keys give " + std::to_string(keys.size()));
  const float* p = reinterpret_cast<const float*>(probs.bytes.data());
  std::string text;
  int64_t prev = -1;
  double conf_sum = 0;
  int n = 0;
  for (int64_t t = 0; t < T; ++t) {
    const float* row = p + t * C;
    int64_t best = std::max_element(row, row + C) - row;
    if (best != 0 && best != prev) { text += keys[size_t(best)]; conf_sum += row[best]; ++n; }
    prev = best;
  }
  confidence = n ? conf_sum / n : 0;
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s REC_MODEL.onnx KEYS.txt IMAGE.ppm [--runs N] [--threads T]\n", argv[0]);
    return 2;
  }
  int runs = 20, threads = 0;
  for (int i = 4; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--runs")) runs = std::max(1, std::atoi(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
  }
  try {
    Image img = read_ppm(argv[3]);
    int W = 0;
    std::vector<float> x = preprocess(img, W);
    auto keys = read_keys(argv[2]);

    rlx::CompileOptions opts;
    opts.threads = threads;
    auto t0 = std::chrono::steady_clock::now();
    rlx::onnx::OnnxRunner runner(rlx::onnx::load_onnx(argv[1]), rlx::Session(rlx::Device::Cpu, opts));
    rlx::TypedTensor in{rlx::DType::F32, {1, 3, 48, W}, std::vector<uint8_t>(x.size() * 4)};
    std::memcpy(in.bytes.data(), x.data(), in.bytes.size());
    const std::string input_name = runner.model().inputs.at(0).name;
    auto out = runner.run({{input_name, in}});
    double first_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

    std::vector<double> ms;
    for (int r = 0; r < runs; ++r) {
      auto a = std::chrono::steady_clock::now();
      out = runner.run({{input_name, in}});
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
    }
    std::sort(ms.begin(), ms.end());
    double conf = 0;
    std::string text = ctc_decode(out.at(0), keys, conf);

    const std::shared_ptr<rlx::CompiledGraph> compiled = runner.compiled({{input_name, {1, 3, 48, W}}});
    const rlx::CompiledGraph& net = *compiled;
    const rlx::CompileReport& rep = net.report();
    std::printf("== compile reports (input 1x3x48x%d)\n", W);
    std::printf("-- dispatch\n%s", rep.dispatch.c_str());
    std::printf("-- fusion (one line per pass; RLX_FUSION_REPORT=1 prints every rewrite and miss)\n%s",
                rep.fusion_summary.c_str());
    std::printf("-- memory\n%s", rep.memory.c_str());
    std::printf("== latency: first run (import + compile + run) %.1f ms; warm p50 %.2f ms, p90 %.2f ms over %d runs, %d threads\n",
                first_ms, ms[ms.size() / 2], ms[std::min(ms.size() - 1, ms.size() * 9 / 10)], runs,
                net.capabilities().threads);
    std::printf("== recognized text: \"%s\" (mean confidence %.3f)\n", text.c_str(), conf);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ocr_demo: error: %s\n", e.what());
    return 1;
  }
}
