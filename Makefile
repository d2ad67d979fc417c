# GSL quick start:
#   make run    install missing Debian packages, build, run the main example
#   make test   same set-up, then every test (ctest)
# Everything builds in build/ (Release). `make deps` only installs packages.

BUILD    ?= build
JOBS     ?= $(shell nproc)
EXAMPLE  ?= examples/moe.gsl
EXAMPLE_NP ?= 8

# Debian 12 packages the project needs (build, tests, tools; fortunes, with
# fortunes-min, is the English text examples/char_lm.gsl and
# examples/moe.gsl train on: 43 files, 2,576,674 bytes under
# /usr/share/games/fortunes; gnuplot-nox draws bench/moe_quality.sh's
# figure). npm (editor
# tests) is installed only when no npm is on PATH: some images ship a
# nodejs that bundles npm and conflicts with Debian's npm package.
PACKAGES := cmake g++ make default-jre-headless antlr4 libantlr4-runtime-dev \
            llvm-19-dev llvm-19-tools clang-19 libclang-rt-19-dev libeigen3-dev libopenmpi-dev openmpi-bin \
            libcli11-dev doctest-dev nlohmann-json3-dev libedit-dev zlib1g-dev libzstd-dev vim tmux nodejs \
            iproute2 util-linux python3-numpy time fortunes gnuplot-nox

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

# Runs the main example in build/run/: the GShard MoE Transformer on 8 ranks
# (threads); it writes its checkpoint moe.safetensors there.
# `make run EXAMPLE=examples/mlp.gsl EXAMPLE_NP=2` runs another one.
# The build's output goes to $(BUILD)/build.log (its end is shown if it fails).
run: configure
	@echo "building gsl (log: $(BUILD)/build.log)"
	@cmake --build $(BUILD) --target gsl -j $(JOBS) >$(BUILD)/build.log 2>&1 || \
	  { tail -n 40 $(BUILD)/build.log; echo "make run: the build failed (log: $(BUILD)/build.log)"; exit 1; }
	@mkdir -p $(BUILD)/run
	@touch $(BUILD)/run/.started
	@echo "gsl run $(EXAMPLE) -np $(EXAMPLE_NP)"
	@cd $(BUILD)/run && ../gsl run ../../$(EXAMPLE) -np $(EXAMPLE_NP)
	@for f in $$(find $(BUILD)/run -maxdepth 1 -name '*.safetensors' -newer $(BUILD)/run/.started); do \
	  echo "make run: the checkpoint is $$f (gsl run --resume $$f continues from it)"; done

test: build fuzz-build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The libFuzzer target over the front end (tests/fuzz, docs/fuzzing.md): its
# own clang-19 build with ASan and UBSan in $(BUILD)/fuzz, only the libraries
# it needs. ctest's fuzz_frontend runs it for 2,500 inputs with a fixed
# seed (about 40 s); `make fuzz` fuzzes for FUZZ_SECONDS (600) seconds.
FUZZ_BUILD := $(BUILD)/fuzz
FUZZ_SECONDS ?= 600
.PHONY: fuzz-build fuzz
$(FUZZ_BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(FUZZ_BUILD) -DGSL_FUZZ=ON -DCMAKE_BUILD_TYPE=Release \
	      -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19
fuzz-build: $(FUZZ_BUILD)/CMakeCache.txt
	cmake --build $(FUZZ_BUILD) --target gsl_fuzz_frontend -j $(JOBS)
fuzz: fuzz-build
	tests/fuzz/run_fuzz.sh $(FUZZ_BUILD) . $(FUZZ_SECONDS)

clean:
	rm -rf $(BUILD)

# The whole ctest suite under AddressSanitizer + UndefinedBehaviorSanitizer
# (gcc, -O1, in build-asan/; test timeouts x5, the fault tests' own time
# limits x6: GSL_TEST_TIME_SCALE). Not part of `make test`: it
# takes about an hour on 2 cores (docs/robustness.md has the figures). Leak
# reports from third-party libraries (OpenMPI, libedit) are suppressed
# by tests/asan/lsan.supp; any report in GSL's code fails the test that hit
# it. The tests that run MPI processes (named mpi_* or *_mpi*) run second, with
# the slow unwinder (OpenMPI has no frame pointers, so its allocations
# would not be recognised) and OpenMPI's plugins kept loaded (a plugin
# unloaded at exit cannot be named in a report). The fuzz test is left
# out: it is its own ASan + UBSan build.
ASAN_BUILD ?= build-asan
ASAN_CFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
ASAN_COMMON := UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
               LSAN_OPTIONS=suppressions=$(CURDIR)/tests/asan/lsan.supp:print_suppressions=0 \
               GSL_TEST_TIME_SCALE=6
ASAN_ENV := $(ASAN_COMMON) ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1
ASAN_MPI_ENV := $(ASAN_COMMON) ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1:fast_unwind_on_malloc=0 \
                OMPI_MCA_mca_base_component_disable_dlclose=1 PMIX_MCA_mca_base_component_disable_dlclose=1
.PHONY: test-asan
test-asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	      -DCMAKE_C_COMPILER=gcc -DCMAKE_CXX_COMPILER=g++ \
	      -DCMAKE_C_FLAGS="$(ASAN_CFLAGS)" -DCMAKE_CXX_FLAGS="$(ASAN_CFLAGS)" \
	      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g" \
	      -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
	      -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" -DGSL_TEST_TIMEOUT_SCALE=5
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && rc=0; \
	  $(ASAN_ENV) ctest --output-on-failure -j $(JOBS) -LE fuzz -E "mpi_|_mpi" || rc=1; \
	  $(ASAN_MPI_ENV) ctest --output-on-failure -j $(JOBS) -LE fuzz -R "mpi_|_mpi" || rc=1; \
	  exit $$rc

# Benchmarks (bench/): each prints its ratio against a reference measured in the same run.
# The MoE quality bench runs one seed of one E and capacity factor here (a
# few minutes); the full grid (docs/moe.md, "Quality at equal FLOPs") is
# `bench/moe_quality.sh build/gsl OUT_DIR` with its defaults (about 40 minutes).
# Their own packages (not needed by the tests): PyTorch, the reference of
# bench/first_step.sh; bc for its arithmetic; OpenBLAS, bench_jit's GEMM
# reference (the library NumPy calls).
BENCH_PACKAGES := python3-torch bc libopenblas0-pthread

.PHONY: bench bench-deps
bench-deps:
	@$(MAKE) --no-print-directory deps PACKAGES="$(BENCH_PACKAGES)"

bench: build bench-deps
	$(BUILD)/bench/bench_compile_time
	$(BUILD)/bench/bench_collectives_threads
	$(BUILD)/bench/bench_train_step
	$(BUILD)/bench/bench_jit
	$(BUILD)/bench/bench_moe
	SEEDS=0 ES=8 CFS=1.25 bench/moe_quality.sh $(BUILD)/gsl $(BUILD)/moe_quality
	SETTINGS="top2:16:1.25 switch:16:1.25 ec:16:1.25" bench/moe_step_time.sh $(BUILD)/gsl 1 3
	bench/first_step.sh $(BUILD)/gsl
	bench/update_sharding.sh $(BUILD) 3
	bench/run_mpi_bench.sh $(BUILD)/bench/bench_collectives_mpi

# Across two hosts (network namespaces, root only): bench/multihost_bench.sh.
.PHONY: bench-multihost
bench-multihost: build
	bench/multihost_bench.sh $(BUILD)/gsl $(BUILD)/bench/bench_collectives_mpi .
