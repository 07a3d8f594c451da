# Top-level entry points. `make demo` and `make test` work on a fresh Debian 12 machine:
# both install what is missing (scripts/install-deps.sh), build, then run.
BUILD ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
PREFIX ?= /usr/local
CMAKE_FLAGS ?=

.PHONY: all deps configure build test demo bench install test-asan fuzz-onnx clean

all: build

deps:
	@bash scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j$(JOBS)

test: build
	@cd $(BUILD) && ctest -j$(JOBS) --output-on-failure --timeout 900

# The demo installs, configures and builds only its own program (scripts/demo.sh), quietly.
demo:
	@BUILD_TYPE=$(BUILD_TYPE) JOBS=$(JOBS) bash scripts/demo.sh $(BUILD)

bench: build
	@bash scripts/bench.sh $(BUILD)

install: build
	@cmake --install $(BUILD) --prefix $(PREFIX)

test-asan:
	@$(MAKE) test BUILD=build-asan BUILD_TYPE=RelWithDebInfo CMAKE_FLAGS="-DRLX_SANITIZE=ON -DRLX_BUILD_BENCH=OFF"

clean:
	@rm -rf $(BUILD) build-asan

# Fuzzing (clang + libFuzzer, ASan + UBSan): builds $(FUZZ_BUILD)/fuzz/rlx_fuzz_NAME and runs it
# for FUZZ_SECONDS over a copy of fuzz/corpus/NAME; non-zero exit on a finding (see fuzz/run.sh).
FUZZ_SECONDS ?= 600
FUZZ_BUILD ?= build-fuzz
.PHONY: fuzz-text fuzz-npy fuzz-gguf
fuzz-onnx fuzz-text fuzz-npy fuzz-gguf:
	@bash scripts/install-deps.sh --fuzz
	@bash fuzz/run.sh $(@:fuzz-%=%) $(FUZZ_BUILD) $(FUZZ_SECONDS) $(JOBS)
