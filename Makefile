# Cognitora — the two commands a fresh Debian machine needs:
#   make run    set up, build, and run the local cluster demo
#   make test   set up, build, and run every test (Release + ASan/UBSan unit)
# Everything else here is a convenience for developers.

BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
JOBS       ?= $(shell nproc)
CMAKE_GEN  := -G Ninja
export CCACHE_DIR ?= $(HOME)/.cache/ccache
export CCACHE_MAXSIZE ?= 5G
# Paths under the checkout are hashed relative to it, so clones in other folders (CI) hit the cache.
export CCACHE_BASEDIR ?= $(CURDIR)
export CCACHE_NOHASHDIR ?= 1

.PHONY: all bootstrap configure build test test-release test-standalone test-asan test-browser test-node test-unit run fuzz bench bench-report bench-kvcached bench-kvcached-replay bench-tiers bench-energy bench-energy-live format tidy clean dist test-package test-oci

all: build

bootstrap:
	@scripts/bootstrap.sh

$(BUILD)/build.ninja: | bootstrap
	cmake -S . -B $(BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Release

configure: bootstrap $(BUILD)/build.ninja

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# Everything a test target starts carries this run's token in its environment, so the last
# step of `make test` finds any process that outlived its test (scripts/check-leftovers.sh).
CGN_TEST_RUN := $(or $(CGN_TEST_RUN),$(shell od -An -N8 -tx8 /dev/urandom | tr -d ' \n'))
export CGN_TEST_RUN

# Release build, every label; the checkout standing alone (no outside references, the unit
# label with the parent folder hidden); the official openai npm client through the router;
# the unit label under AddressSanitizer/UBSan; the dashboard in headless Chromium; then no
# process any of them started may still be alive.
test: test-release test-standalone test-node test-asan test-browser
	@scripts/check-leftovers.sh

# Skipped tests are listed by their executables in <build>/Testing/skipped-tests.txt.
skip_summary = n=$$(cat $(1)/Testing/skipped-tests.txt 2>/dev/null | wc -l); \
  echo "$(1): $$n test(s) skipped"; sed 's/^/  skipped: /' $(1)/Testing/skipped-tests.txt 2>/dev/null || true

test-release: build
	@rm -f $(BUILD)/Testing/skipped-tests.txt
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) --timeout 900
	@$(call skip_summary,$(BUILD))

# Nothing tracked refers outside the repo; the already-built unit label passes with the
# checkout's parent folder hidden behind an empty tmpfs (scripts/test-standalone.sh).
test-standalone: build
	scripts/check-standalone.sh
	scripts/test-standalone.sh $(BUILD) '^unit$$'

test-asan: bootstrap
	@test -f $(ASAN_BUILD)/build.ninja || cmake -S . -B $(ASAN_BUILD) $(CMAKE_GEN) \
	  -DCMAKE_BUILD_TYPE=Debug -DCGN_SANITIZE=ON -DCGN_BUILD_BENCH=OFF \
	  -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g"
	cmake --build $(ASAN_BUILD) -j $(JOBS) --target unit_tests
	@rm -f $(ASAN_BUILD)/Testing/skipped-tests.txt
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir $(ASAN_BUILD) --output-on-failure -j $(JOBS) -L unit
	@$(call skip_summary,$(ASAN_BUILD))

# The dashboard against the mock fleet, then against a real router with simulators.
test-browser: build
	tests/browser/run.sh
	CGN_BIN_DIR=$(CURDIR)/$(BUILD)/bin scripts/browser-vs-router.sh

test-node: build
	CGN_BIN_DIR=$(CURDIR)/$(BUILD)/bin tests/node/run.sh

# Fast loop for developers: the unit label of the Release build.
test-unit: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) -L unit

run: build
	@scripts/run.sh

# libFuzzer builds (clang). Each target runs for FUZZ_SECONDS over its corpus.
FUZZ_SECONDS ?= 60
fuzz:
	@scripts/bootstrap.sh --fuzz
	@test -f $(FUZZ_BUILD)/build.ninja || CC=clang CXX=clang++ cmake -S . -B $(FUZZ_BUILD) $(CMAKE_GEN) \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCGN_LIBFUZZER=ON -DCGN_SANITIZE=ON -DCGN_BUILD_BENCH=OFF
	cmake --build $(FUZZ_BUILD) -j $(JOBS)
	@scripts/fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

bench: build
	@scripts/bench.sh $(BUILD)

# The performance report: a new bench/results/<date>-<revision>/report.md with its plots (gnuplot).
bench-report: configure
	@scripts/bootstrap.sh --bench
	@scripts/bench-report.sh $(BUILD)

# cgn-kvcached: block bandwidth (fast path, gRPC, Redis, SSD tier against memcpy and read(2)) and
# the conversation trace's replay against the reference LRU; each writes a new
# bench/results/<date>-<revision>/ file (bench/kvcached/README.md). Minutes; not in make test.
bench-kvcached: configure
	cmake --build $(BUILD) -j $(JOBS) --target cgn-kvcached cgn-kvcached-bench
	@scripts/bench-kvcached.sh $(BUILD)

bench-kvcached-replay: configure
	cmake --build $(BUILD) -j $(JOBS) --target cgn-kvcached cgn-kvcached-replay
	@scripts/bench-kvcached-replay.sh $(BUILD)

# KV offload tiers in the cluster simulator: kv with and without tiers, round_robin with tiers and
# disagg-cgn on the held-out conversation sessions (scripts/bench-tiers.sh, docs/benchmarks.md).
# A few minutes and ~5.4 GB; not in make test.
bench-tiers: configure
	cmake --build $(BUILD) -j $(JOBS) --target cgn-bench
	@scripts/bench-tiers.sh $(BUILD)

# Fleet J/token and J/request per routing policy from the simulator's power model (modelled, not
# measured; scripts/bench-energy.sh, docs/benchmarks.md). Minutes; not in make test.
bench-energy: configure
	cmake --build $(BUILD) -j $(JOBS) --target cgn-bench
	@scripts/bench-energy.sh $(BUILD)

# The same comparison live: per policy, simulators with the power model behind agents and a router;
# J/token and J/request from the router's energy gauges (modelled energy; scripts/bench-energy-live.sh).
bench-energy-live: build
	@BIN=$(BUILD)/bin scripts/bench-energy-live.sh

# Release artifacts in $(DIST): cognitora-<v>-linux-amd64.tar.gz and cognitora_<v>_amd64.deb with
# their .sha256 files (packaging/build-dist.sh; docs/operations/packaging.md). `make test` checks
# them (ctest label package); the two targets below install them into fresh bookworm roots
# (mmdebstrap, the Debian mirror) and are not part of it.
DIST ?= out/dist
dist: build
	packaging/build-dist.sh $(BUILD)/bin $(DIST)

test-package: dist
	@scripts/bootstrap.sh --package
	packaging/test-package.sh $(DIST)

test-oci: dist
	@scripts/bootstrap.sh --package
	packaging/test-oci.sh $(DIST)

format:
	@git ls-files '*.cpp' '*.h' | xargs clang-format -i

tidy: configure
	@git ls-files 'src/*.cpp' | xargs clang-tidy -p $(BUILD) --quiet

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
