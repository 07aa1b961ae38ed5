# eldr-sim: `make run` and `make test` each install what is missing, build (Release) and go.
BUILD   ?= build
JOBS    ?= $(shell nproc)
PY      := /usr/bin/python3
CONFIG  ?= configs/default.json
OUT     ?= results/default

DEB_PACKAGES := cmake g++ make pkg-config libsimgrid-dev libboost-graph-dev nlohmann-json3-dev \
                doctest-dev libbenchmark-dev libcli11-dev libyaml-cpp-dev python3-numpy python3-pandas \
                python3-matplotlib python3-scipy slurm-wlm munge clang clang-format

.PHONY: all deps build eldrsim run test bench esft mooncake clean paper report validate regression-baseline sanitize fuzz docs

all: build

# Installs only the Debian packages that are missing (needs root, as on CI and the dev machines).
deps:
	@missing=$$(for p in $(DEB_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing: $$missing"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi

$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release

# Everything: the simulator, the test programs and the benchmarks (`make test`, `make bench`).
build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# Only the simulator: `make run` needs nothing else (it plots with Debian's python3).
eldrsim: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS) --target eldrsim

run: eldrsim
	@routers=$$($(BUILD)/eldrsim routers); dirs=""; \
	for r in $$routers; do \
	  echo "simulating $(CONFIG) with router $$r"; \
	  $(BUILD)/eldrsim run $(CONFIG) --router $$r --out $(OUT)/$$r --quiet || exit $$?; \
	  dirs="$$dirs $(OUT)/$$r"; \
	done; \
	$(BUILD)/eldrsim table $$dirs
	@$(PY) analysis/plot_routers.py $(OUT) && echo "plots: $(OUT)/tpot_cdf.png $(OUT)/latency_by_router.png"
	@echo "results: $(OUT)/<router>/summary.json, requests.csv"

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

bench: build
	$(BUILD)/bench/eldr_bench
	bench/time_runs.sh $(BUILD)/eldrsim

# Real routing replayed: import the ESFT per-token routing (shipped in traces/routing/, see
# docs/trace-format.md) once, then simulate it.
traces/esft/trace.json: | eldrsim
	$(BUILD)/eldrsim trace import esft --out traces/esft --calibration 40 --repeat 4

esft: eldrsim traces/esft/trace.json
	$(BUILD)/eldrsim trace stats configs/esft.json
	$(BUILD)/eldrsim run configs/esft.json --out results/esft

# Prefix sharing replayed: the Mooncake conversation trace with prefix caching on and off.
traces/mooncake/trace.json: | eldrsim
	$(BUILD)/eldrsim trace import mooncake --out traces/mooncake --max-prompt 8192

mooncake: eldrsim traces/mooncake/trace.json
	$(BUILD)/eldrsim run configs/mooncake.json --out results/mooncake/cache-on
	$(BUILD)/eldrsim run configs/mooncake.json --set serving.prefix_cache=false --out results/mooncake/cache-off
	$(BUILD)/eldrsim table results/mooncake/cache-off results/mooncake/cache-on

# The paper's experiments (configs/paper/, docs/experiments.md): resumable; then the report.
SWEEP   ?= configs/paper/all.json
RESULTS ?= results/paper

paper: eldrsim
	$(BUILD)/eldrsim sweep $(SWEEP) --out $(RESULTS) -j $(JOBS)

report: eldrsim
	$(BUILD)/eldrsim report $(RESULTS)

# The simulator against the testbed (docs/calibration.md): 30 round-robin cells, leave-one-rate-out
# predictions and the published router claims, into results/validate/report.md.
validate: eldrsim
	$(BUILD)/eldrsim validate -j $(JOBS)

# Regenerates the pages generated from code: docs/config-reference.md from the keys' declarations
# (tests/cli/config_keys.sh fails when it is stale).
docs: eldrsim
	$(BUILD)/eldrsim config keys --markdown >docs/config-reference.md

# Refreshes the committed TPOT baseline that `make test` gates on (tests/regression/): only when a
# change is meant to move TPOT; commit tests/regression/baseline/ with it.
regression-baseline: eldrsim
	tests/regression/refresh.sh $(BUILD)/eldrsim

# The whole suite under AddressSanitizer + UndefinedBehaviorSanitizer (CI runs it after `make test`),
# but the Slurm test, cli/expected_union (72 full-size runs comparing two modes' statistics; every
# other test runs the expected mode too) and cli/reliability (its 100,000-level and megabyte inputs
# take far beyond its timeout under ASan; fuzz_json feeds the same kinds of input to the readers
# under ASan in `make fuzz`).
sanitize: deps
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DELDR_SANITIZE=ON -DELDR_BENCH=OFF
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1:detect_stack_use_after_return=0:abort_on_error=1 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j $(JOBS) -E 'cli/slurm|cli/expected_union|cli/reliability'

# libFuzzer harnesses of every input reader (fuzz/README.md); FUZZ_LIMIT per harness.
FUZZ_LIMIT ?= -max_total_time=60
fuzz: deps
	CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DELDR_FUZZ=ON -DELDR_BENCH=OFF -DBUILD_TESTING=OFF
	cmake --build build-fuzz -j $(JOBS) --target fuzzers
	fuzz/run.sh build-fuzz $(FUZZ_LIMIT)

clean:
	rm -rf $(BUILD) build-asan build-fuzz
