# rungs — top-level tasks. The README's first lines use `make demo` and
# `make test`; .ci/run runs `make test`.
#
#   make demo                 build and run the main demo (installs what it needs)
#   make test                 every test: cargo, clippy, rustfmt, header, C harness, examples
#   make check                the fast loop: layers, doc paths, rustfmt, clippy, unit tests, header
#   make lib                  build the release library and target/pkgconfig/rungs.pc
#                             (CARGO_TARGET_DIR, when set, replaces target/ everywhere)
#   make install PREFIX=DIR   install headers, libraries (stripped, SONAME links), rungs.pc and
#                             the CMake package under DIR
#   make pkgconfig-check      compile a C program through pkg-config, shared and static
#   make cmake-check          compile a C program through find_package(rungs), shared and static
#   make package-check        cargo package of the publishable crates, rustdoc without warnings
#   make dist                 the release archives in target/dist/ (mk/dist.mk)
#   make dist-check           each archive unpacked alone builds and runs an example (Wine, pkg-config, CMake)
#   make windows              rungs.dll for i686 and x86_64 Windows (mk/windows.mk, docs/windows.md)
#   make windows-test         Windows and 32-bit checks: imports, exports, layouts, Wine (64- and 32-bit),
#                             gcc -m32, the TS-shaped model as a 32-bit game with its mod DLL
#   make ts-model             the Tiberian Sun-shaped engine model: 200 seeded games in every mode
#                             and the figures table (docs/ts-integration.md)
#   make sim-pgo              rungs-sim with profile-guided optimisation (target/pgo/release)
#   make relay-attack         the relay binary attacked during an honest match (docs/relay.md "Security")
#   make model-check          the drop agreement model-checked at 3, 4 and 5 seats (minutes and a few GB; docs/turns.md)

PREFIX  ?= /usr/local
ROOT    := $(CURDIR)
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
include $(ROOT)/mk/target.mk
RELEASE := $(TARGET_DIR)/release
PCDIR   := $(TARGET_DIR)/pkgconfig

.PHONY: setup demo test check lib pc install pkgconfig-check cmake-check package-check header-check \
    clean ts-model model-check

include mk/windows.mk
include mk/dist.mk

setup:
	@./scripts/setup.sh

lib:
	cargo build --release --quiet
	@$(MAKE) --no-print-directory pc

# rungs.pc for the build tree (PKG_CONFIG_PATH=target/pkgconfig, or
# $CARGO_TARGET_DIR/pkgconfig): libdir is where cargo put the library.
pc:
	@mkdir -p $(PCDIR)
	@./scripts/write-pc.sh "$(PCDIR)/rungs.pc" "$(ROOT)/include" "$(RELEASE)" "$(VERSION)"

demo: setup lib
	$(MAKE) -C examples-c run

header-check:
	cargo build --quiet
	git diff --exit-code -- include/
	@new=$$(git ls-files --others --exclude-standard -- include/); \
	    if [ -n "$$new" ]; then echo "header-check: build.rs wrote headers that are not committed: $$new"; exit 1; fi

# Every crate of the workspace (the layers, the simulator, the relay, the
# drop model): unit tests, integration tests, doctests.
test: setup
	./scripts/check-layers.sh
	python3 scripts/doc-paths.py
	cargo test --workspace
	cargo clippy --workspace --all-targets -- -D warnings
	cargo fmt --all --check
	RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet
	$(MAKE) header-check
	$(MAKE) -C ffi-tests check vectors asan valgrind
	$(MAKE) -C examples-c run
	$(MAKE) -C examples-cpp run
	$(MAKE) pkgconfig-check
	$(MAKE) cmake-check
	$(MAKE) windows-test

# The fast loop before a commit (CONTRIBUTING.md): format, lint, the unit
# tests of every crate, the committed header. A minute or two once built;
# `make test` runs everything.
check:
	./scripts/check-layers.sh
	python3 scripts/doc-paths.py
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -- -D warnings
	cargo test --workspace --lib --quiet
	$(MAKE) --no-print-directory header-check

# Every interleaving of crashes, losses and message orders of one drop, for
# 3, 4 and 5 seats (tools/drop-model; the short form runs in `make test`).
model-check:
	cargo run --release -p rungs-drop-model -- full

# The headers, librungs.so.VERSION with its SONAME link librungs.so.ABI and
# the dev link librungs.so (decision 100), librungs.a, rungs.pc and the CMake
# package (lib/cmake/rungs), without debug info (scripts/dist-install.sh).
install: lib
	./scripts/dist-install.sh "$(RELEASE)" "$(DESTDIR)$(PREFIX)" "$(VERSION)" "$(PREFIX)"

# Build examples-c/ladder.c through pkg-config from the build tree and from
# an install, linked shared and static, and run each.
pkgconfig-check: lib
	@tmp=$$(mktemp -d) && trap 'rm -rf $$tmp' EXIT && \
	$(MAKE) --no-print-directory install PREFIX=$$tmp/prefix >/dev/null && \
	for pcpath in $(PCDIR) $$tmp/prefix/lib/pkgconfig; do \
	    cc -std=c99 -Wall -Werror examples-c/ladder.c -o $$tmp/shared \
	        $$(PKG_CONFIG_PATH=$$pcpath pkg-config --cflags --libs rungs) -Wl,-rpath,$$(PKG_CONFIG_PATH=$$pcpath pkg-config --variable=libdir rungs) && \
	    $$tmp/shared 250 30 | grep -q '3/9 Normal (rung 3)' && \
	    cc -std=c99 -Wall -Werror examples-c/ladder.c -o $$tmp/static \
	        $$(PKG_CONFIG_PATH=$$pcpath pkg-config --cflags rungs) \
	        $$(PKG_CONFIG_PATH=$$pcpath pkg-config --variable=libdir rungs)/librungs.a \
	        $$(PKG_CONFIG_PATH=$$pcpath pkg-config --static --libs-only-other --libs-only-l rungs | sed 's/-lrungs//') && \
	    $$tmp/static 250 30 | grep -q '2/6 Fast (rung 2)' || exit 1; \
	done && echo "pkg-config: shared and static builds work from the build tree and an install"

# Build examples-c/ladder.c through find_package(rungs) against an install,
# with rungs::rungs and rungs::rungs_static, and run each.
cmake-check: lib
	@tmp=$$(mktemp -d) && trap 'rm -rf $$tmp' EXIT && \
	$(MAKE) --no-print-directory install PREFIX=$$tmp/prefix >/dev/null && \
	./scripts/dist-check-linux.sh $$tmp/prefix examples-c/ladder.c cmake/example cmake

# What a crates.io release would upload: every publishable crate packaged
# and built alone (rungs-core, rungs-net, rungs; uncommitted changes
# included, so it checks the tree as it is), and the API docs without a
# warning.
package-check:
	cargo package --workspace --allow-dirty --quiet --exclude rungs-sim --exclude rungs-relay \
	    --exclude rungs-layout-check --exclude rungs-drop-model
	RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet

# The Tiberian Sun-shaped engine model (examples-c/tsmodel): 200 seeded games
# with faults in each vanilla mode and in rungs mode, the figures table; the
# last line is "ts-model: G games, D desyncs, L too late" for rungs mode.
# (`make test` runs its short form through examples-c's `run`.)
ts-model: lib
	@$(MAKE) --no-print-directory -C examples-c/tsmodel full

clean:
	cargo clean
	$(MAKE) -C ffi-tests clean
	$(MAKE) -C examples-c clean
	$(MAKE) -C examples-cpp clean

# rungs-sim's scenario suite (crates/rungs-sim/scenarios/*.args): every
# scenario with every policy, the table and the targets. Release build: it
# simulates hours.
.PHONY: sim-suite
sim-suite:
	cargo run --release --quiet -p rungs-sim --bin rungs-sim -- suite

# rungs-sim built with profile-guided optimisation, in $(TARGET_DIR)/pgo/release
# (target/release untouched): the same results, about 10 % faster
# (scripts/sim-pgo.sh; needs llvm-profdata of rustc's LLVM).
.PHONY: sim-pgo
sim-pgo:
	./scripts/sim-pgo.sh $(TARGET_DIR)

# The kernel's CPU per loopback UDP datagram sent and received on this
# machine: the floor under the relay's matches per core (docs/experiments.md,
# "What one relay core holds"). Linux; a C compiler.
.PHONY: udp-cost
udp-cost:
	mkdir -p $(TARGET_DIR)/tools
	$(CC) -O2 -Wall -o $(TARGET_DIR)/tools/udp_cost tools/udp-cost/udp_cost.c
	$(TARGET_DIR)/tools/udp_cost

# The relay attacked over loopback while an honest match plays: every attack
# for 20 s, the table of docs/relay.md "Security" (Linux). Release build; the
# 2 s short form runs in `make test` (crates/rungs-relay/tests/relay_attack_udp.rs).
.PHONY: relay-attack
relay-attack:
	cargo build --release --quiet -p rungs-relay --bin rungs-relay --bin rungs-relay-attack
	$(RELEASE)/rungs-relay-attack
