# The front door. `make test` is what CI runs (.ci/run).
# The network tests and the demo take their implementations from the
# environment: IMPL_A, IMPL_B (tests/net/interop.sh), IMPLS, DEMO_SECONDS
# (scripts/demo.sh).
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.NOTPARALLEL:
.PHONY: setup build test demo fuzz lint

setup:
	scripts/setup.sh

build:
	cargo build --release --workspace

# Ends with the network tests' summary line: "N passed, M failed".
test: setup build
	cargo test --workspace --release
	tests/net/interop.sh

demo: setup build
	scripts/demo.sh

fuzz:
	@if [ -x scripts/fuzz.sh ]; then scripts/fuzz.sh all 600; \
	else echo "fuzz: scripts/fuzz.sh is not there yet" >&2; fi

lint:
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -- -D warnings
