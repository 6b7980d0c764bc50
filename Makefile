# Set-up and entry points. `make demo` and `make test` each do all the set-up on a fresh machine:
# a .venv with pinned packages, the native runtime built through the package build, the data.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP_DEPS := $(VENV)/.deps-installed
STAMP_BUILD := $(VENV)/.deepslim-built
DATA_DIR := /usr/share/datasets/fashion-mnist
NATIVE_SRC := $(shell find native -type f \( -name '*.cc' -o -name '*.h' -o -name '*.c' -o -name 'CMakeLists.txt' \) 2>/dev/null)
JOBS ?= 2

.PHONY: all demo test build data native-test py-test test-aarch64 bench bench-peers clean help

help:
	@echo "make demo   train, compress and run LeNet-300-100 and LeNet-5 on Fashion-MNIST; writes results/demo.json"
	@echo "make test   the whole test suite (native tests, then pytest)"
	@echo "make build  create .venv, install pinned packages, build the native runtime"
	@echo "make bench  native kernel benchmarks"
	@echo "make bench-peers  install OpenVINO, ncnn and pnnx for 'deepslim bench'"
	@echo "make test-aarch64  cross-build the runtime for 64-bit ARM and run its native tests under qemu"

$(STAMP_DEPS): requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --disable-pip-version-check -q -r requirements.txt
	touch $@

# The package build (scikit-build-core + CMake) compiles the runtime into deepslim/runtime.
$(STAMP_BUILD): $(STAMP_DEPS) pyproject.toml CMakeLists.txt $(NATIVE_SRC)
	$(PIP) install --disable-pip-version-check -q --no-build-isolation --no-deps -e .
	touch $@

build: $(STAMP_BUILD)

# Fashion-MNIST comes from Debian's dataset-fashion-mnist package; nothing is downloaded at run time.
data:
	@if [ -f $(DATA_DIR)/t10k-labels-idx1-ubyte.gz ] || [ -n "$$DEEPSLIM_DATA" ]; then :; \
	elif command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	  echo "Installing Fashion-MNIST (Debian package dataset-fashion-mnist)"; \
	  (apt-get install -y -q dataset-fashion-mnist || (apt-get update -q && apt-get install -y -q dataset-fashion-mnist)) >/dev/null; \
	else echo "Fashion-MNIST not found: run 'apt-get install dataset-fashion-mnist' as root, or set DEEPSLIM_DATA to a folder with its four .gz files"; exit 1; fi

demo: build data
	$(VENV)/bin/deepslim demo

native-test: $(STAMP_DEPS)
	$(VENV)/bin/cmake -S native -B build/native-tests -G Ninja -DCMAKE_MAKE_PROGRAM=$(abspath $(VENV)/bin/ninja) \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDEEPSLIM_BUILD_TESTS=ON -DDEEPSLIM_BUILD_EXAMPLES=ON >/dev/null
	$(VENV)/bin/cmake --build build/native-tests -j $(JOBS)
	$(VENV)/bin/ctest --test-dir build/native-tests --output-on-failure

# The runtime on 64-bit ARM (a Raspberry Pi 4/5 class board): cross-built with Debian's toolchain,
# its native tests run under qemu-user. Not part of `make test` (it takes a few minutes).
test-aarch64: $(STAMP_DEPS)
	@if ! command -v aarch64-linux-gnu-g++ >/dev/null || ! command -v qemu-aarch64 >/dev/null; then \
	  if command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	    echo "Installing g++-aarch64-linux-gnu and qemu-user"; \
	    (apt-get install -y -q g++-aarch64-linux-gnu qemu-user || (apt-get update -q && apt-get install -y -q g++-aarch64-linux-gnu qemu-user)) >/dev/null; \
	  else echo "needs g++-aarch64-linux-gnu and qemu-user: run 'apt-get install g++-aarch64-linux-gnu qemu-user' as root"; exit 1; fi; \
	fi
	$(VENV)/bin/cmake -S native -B build/aarch64 -G Ninja -DCMAKE_MAKE_PROGRAM=$(abspath $(VENV)/bin/ninja) \
	  -DCMAKE_TOOLCHAIN_FILE=$(abspath native/cmake/aarch64-linux-gnu.cmake) -DCMAKE_BUILD_TYPE=Release \
	  -DDEEPSLIM_BUILD_TESTS=ON -DDEEPSLIM_BUILD_EXAMPLES=ON >/dev/null
	$(VENV)/bin/cmake --build build/aarch64 -j $(JOBS)
	$(VENV)/bin/ctest --test-dir build/aarch64 --output-on-failure

py-test: build data
	$(PY) -m pytest -q

test: native-test py-test

bench: $(STAMP_DEPS)
	$(VENV)/bin/cmake -S native -B build/native-bench -G Ninja -DCMAKE_MAKE_PROGRAM=$(abspath $(VENV)/bin/ninja) \
	  -DCMAKE_BUILD_TYPE=Release -DDEEPSLIM_BUILD_BENCH=ON >/dev/null
	$(VENV)/bin/cmake --build build/native-bench -j $(JOBS)
	@for b in build/native-bench/bench_*; do echo "== $$b"; $$b; done

# Peers for `deepslim bench` (ONNX Runtime comes with requirements.txt).
bench-peers: $(STAMP_DEPS)
	$(PIP) install --disable-pip-version-check -q -r requirements-bench.txt

clean:
	rm -rf build $(STAMP_BUILD)
