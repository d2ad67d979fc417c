# GSL quick start:
#   make run    install missing Debian packages, build, run the main example
#   make test   same set-up, then every test (ctest)
# Everything builds in build/ (Release). `make deps` only installs packages.

BUILD    ?= build
JOBS     ?= $(shell nproc)
EXAMPLE  ?= examples/mlp.gsl
EXAMPLE_NP ?= 2

# Debian 12 packages the project needs (build, tests, tools). npm (editor
# tests) is installed only when no npm is on PATH: some images ship a
# nodejs that bundles npm and conflicts with Debian's npm package.
PACKAGES := cmake g++ make default-jre-headless antlr4 libantlr4-runtime-dev \
            llvm-19-dev llvm-19-tools clang-19 libeigen3-dev libopenmpi-dev openmpi-bin \
            libcli11-dev doctest-dev libedit-dev zlib1g-dev libzstd-dev vim tmux nodejs

.PHONY: all deps configure build run test clean

all: build

# Installs only what is missing; uses sudo when not root.
deps:
	@missing=""; for p in $(PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	command -v npm >/dev/null 2>&1 || missing="$$missing npm"; \
	if [ -n "$$missing" ]; then \
	  echo "Installing missing Debian packages:$$missing"; \
	  SUDO=""; [ "$$(id -u)" -eq 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q $$missing; \
	fi

$(BUILD)/CMakeCache.txt: CMakeLists.txt | deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release

configure: deps $(BUILD)/CMakeCache.txt

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# Runs the main example in build/run/ (it writes its input x.npy there on
# the first run and reads it afterwards).
run: build
	@mkdir -p $(BUILD)/run
	cd $(BUILD)/run && ../gsl run ../../$(EXAMPLE) -np $(EXAMPLE_NP)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

clean:
	rm -rf $(BUILD)

# Benchmarks (bench/): each prints its ratio against a reference measured in the same run.
.PHONY: bench
bench: build
	$(BUILD)/bench/bench_compile_time
	$(BUILD)/bench/bench_collectives_threads
	$(BUILD)/bench/bench_train_step
	$(BUILD)/bench/bench_jit
	bench/run_mpi_bench.sh $(BUILD)/bench/bench_collectives_mpi
