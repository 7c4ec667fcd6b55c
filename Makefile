# The front door. `make test` is what CI runs (.ci/run).
# The network tests and the demo take their implementations from the
# environment: IMPL_A, IMPL_B (tests/net/interop.sh), IMPLS, DEMO_SECONDS
# (scripts/demo.sh).
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.NOTPARALLEL:
.PHONY: setup build test demo demo-gateway demo-l2 demo-ipsec demo-openvpn fuzz lint

setup:
	scripts/setup.sh

build:
	cargo build --release --workspace

# Ends with the network tests' summary line: "N passed, M failed".
# As root, a test that would skip for a missing piece fails instead (see
# io::netns::skip_test), so nothing passes without having run.
test: setup build
	if [ "$$(id -u)" = 0 ]; then export LINERATE_REQUIRE_PRIVILEGED_TESTS=1; fi; \
	cargo test --workspace --release
	/usr/bin/python3 scripts/import-cycles.py --max $(IMPORT_CYCLES_MAX)
	/usr/bin/python3 tests/crypto/cbc_hmac_vectors.py | diff - crates/crypto/tests/data/cbc_hmac.txt
	tests/esp/known_answers.sh
	GW_WORKERS=2 tests/net/gateway.sh
	# The jumbo scenario runs once, on AF_XDP: the ESP and OpenVPN ones run
	# jumbo gateways on AF_PACKET, the L2 one on both. The service one runs once
	# too, on AF_XDP, whose needs cover AF_PACKET's.
	GW_WORKERS=2 GW_DRIVER=af_packet tests/net/gateway.sh $$(tests/net/gateway.sh --list | grep -vxE 'jumbo|service')
	# One worker: the owner alone (reload, service and the rest run with two).
	GW_WORKERS=1 tests/net/gateway.sh ping tcp neighbors workers
	GW_WORKERS=2 tests/net/l2.sh
	GW_DRIVER=af_packet tests/net/l2.sh
	GW_WORKERS=2 tests/net/esp.sh
	GW_DRIVER=af_packet tests/net/esp.sh v4_udp v6_esp
	GW_WORKERS=2 tests/net/ike.sh
	GW_WORKERS=2 tests/net/openvpn.sh
	LINERATE_WORKERS=2 tests/net/interop.sh
	LINERATE_WORKERS=2 LINERATE_SPREAD=1 tests/net/interop.sh tcp tcp_v6 roaming counters_add_up
	LINERATE_WORKERS=1 tests/net/interop.sh a_initiates_v4 tcp restart

demo: setup build
	scripts/demo.sh

demo-gateway: setup build
	scripts/gateway-bench.sh --seconds 3

demo-l2: setup build
	target/release/linerate bench --l2 --sizes 64,1420,imix --seconds 1
	scripts/l2-bench.sh --seconds 3
	scripts/l2-bench.sh --seconds 3 --sizes "1514 9014"

demo-openvpn: setup build
	tests/net/openvpn.sh ciphers
	target/release/linerate bench --tunnel openvpn --alg aes-256-gcm --sizes 64,1420 --seconds 1 --repeat 3
	scripts/openvpn-bench.sh --seconds 5

demo-ipsec: setup build
	tests/net/esp.sh v4_esp tshark_decodes
	tests/net/ike.sh linerate_initiates linerate_rekeys
	target/release/linerate bench --tunnel esp --alg aes128gcm16 --sizes 64,512,1420,imix --seconds 1
	target/release/linerate bench --tunnel esp --alg chacha20poly1305 --sizes 64,512,1420,imix --seconds 1

fuzz:
	@if [ -x scripts/fuzz.sh ]; then scripts/fuzz.sh all 600; \
	else echo "fuzz: scripts/fuzz.sh is not there yet" >&2; fi

# Import cycles between sibling modules allowed (see ARCHITECTURE.md): none, so a
# module that imports a sibling importing it back fails here.
IMPORT_CYCLES_MAX := 0

lint:
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -- -D warnings
	/usr/bin/python3 scripts/import-cycles.py --max $(IMPORT_CYCLES_MAX)
