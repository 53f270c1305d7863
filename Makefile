# The two commands a new user needs: `make run` and `make test`.
# Both install missing Debian packages first (scripts/install-deps).
BUILD_DIR ?= build

.PHONY: run test build deps bench soak fuzz sanitize clean format

run:
	scripts/run

test:
	scripts/test

build: deps
	scripts/build

deps:
	scripts/install-deps

# The performance table (docs/performance.md), a few minutes.
bench: build
	scripts/bench

# Ten minutes of mixed load; prints RSS, fds, threads and turns/s each minute.
soak: build
	$(BUILD_DIR)/bench/bench_soak --minutes 10

# The libFuzzer targets, five minutes each (make test runs them 20 s each).
fuzz:
	scripts/fuzz 300

# The unit tests under ASan + UBSan (a separate ~30 min build).
sanitize:
	scripts/sanitize

format:
	clang-format -i $$(git ls-files '*.cpp' '*.hpp')

clean:
	rm -rf $(BUILD_DIR)
