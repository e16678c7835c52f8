# Tandem: synchronous multi-master replication for MariaDB.
# `make demo` and `make test` work on a fresh Debian 12 machine (as root).

SHELL := /bin/bash
PACKAGES := mariadb-server mariadb-backup mariadb-test galera-4 galera-arbitrator-4 sysbench haproxy keepalived socat tcpdump iproute2 nftables systemd openssl lintian dpkg-dev binutils gdb
# Without their recommendations: Prometheus' would add exporters and IPMI tools.
LEAN_PACKAGES := prometheus
CARGO ?= cargo
PROVIDER := target/release/libtandem.so
# The floor the bench measures against (crates/null-provider): built, never shipped.
NULL_PROVIDER := target/release/libtandem_null.so
TANDEM := target/release/tandem
# The lab beside it: benchmarks and MariaDB's MTR suites.
LAB := target/release/tandem-lab
DEMO_DIR ?= .tandem/demo

.PHONY: deps build package lint demo demo-down test test-unit test-sim test-cluster test-package test-partitions test-wan consistency test-mtr mtr bench bench-quick clean

# Install the Debian packages we need (only the missing ones). The
# distribution's own mariadb service may run beside: our clusters use their
# own ports and directories.
deps:
	@missing=$$(for p in $(PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "Installing: $$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi
	@missing=$$(for p in $(LEAN_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "Installing: $$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi
	@command -v $(CARGO) >/dev/null || { echo "cargo not found: install Rust (rustup) first"; exit 1; }

build: deps
	$(CARGO) build --release -p tandem-provider -p tandem-null-provider -p tandem -p tandem-lab

# The Debian package (target/debian/tandem_<version>_amd64.deb) from the
# release build: what goes where is in docs/operations.md ("Installing the
# package"). lintian must find no error and no warning.
package: build
	packaging/deb/build-package.sh --lintian

# A 3-node cluster on loopback, a short write workload on all nodes, then
# every node's status and row counts. Stop it with `make demo-down`.
demo: build
	$(TANDEM) cluster down --dir $(DEMO_DIR) >/dev/null 2>&1 || true
	$(TANDEM) cluster up --nodes 3 --provider tandem --provider-path $(PROVIDER) --dir $(DEMO_DIR)
	scripts/demo-workload.sh $(DEMO_DIR)
	$(TANDEM) cluster status --dir $(DEMO_DIR) --tables

demo-down:
	$(TANDEM) cluster down --dir $(DEMO_DIR)

test: build lint test-unit test-sim test-cluster test-package test-mtr

# rustfmt's layout (rustfmt.toml), and clippy with every warning an error,
# the lock lints of Cargo.toml ([workspace.lints.clippy]: no guard in a
# match/if-let scrutinee, none across an await) among them.
lint:
	@$(CARGO) fmt --version >/dev/null 2>&1 || rustup component add rustfmt
	@$(CARGO) clippy --version >/dev/null 2>&1 || rustup component add clippy
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

test-unit:
	$(CARGO) test --workspace --exclude tandem-cluster-tests

# The production group under turmoil's deterministic simulation
# (docs/simulation.md): seeds 1-4, a replay check, and the negative tests
# (defects put back with the feature negative-tests; each must be caught).
# Built with --cfg tokio_unstable, which turmoil needs to seed tokio, in a
# target directory of its own so that no other build changes flags.
# SIM_SEED=n replays one seed. Then the engine's shell on the production
# group over the simulated network (crates/engine/tests/shell_simulation.rs,
# not seeded: the nodes' threads are OS threads): stops, cuts, kill -9,
# power cuts and a damaged log, with its negative tests.
# FREE_DEBUG_TARGETS=1 (CI) removes the debug and simulation targets
# afterwards: every later step of `test` builds in release, and the test
# clusters need the disk.
SIM_TARGET := target/sim
test-sim:
	RUSTFLAGS="--cfg tokio_unstable" CARGO_TARGET_DIR=$(SIM_TARGET) $(CARGO) test -p tandem-group \
		--features negative-tests --test simulation -- --test-threads=1
	$(CARGO) test -p tandem-engine --features negative-tests --test shell_simulation
	@if [ "$(FREE_DEBUG_TARGETS)" = 1 ]; then \
		echo "FREE_DEBUG_TARGETS=1: removing $(SIM_TARGET) and target/debug (no later step uses them)"; \
		rm -rf $(SIM_TARGET) target/debug; \
	fi

# Real mariadbd clusters on loopback with our provider.
test-cluster: build
	TANDEM_PROVIDER=$(CURDIR)/$(PROVIDER) TANDEM_NULL_PROVIDER=$(CURDIR)/$(NULL_PROVIDER) \
		$(CARGO) test --release -p tandem-cluster-tests -- --test-threads=1
	$(CARGO) test --release -p tandem-group --test cluster late_joiner_gets_a_snapshot_larger_than_a_frame

# The package as a user gets it (root): built, installed with dpkg -i, a
# 3-node cluster from the installed paths only, then removed and purged with
# the databases' files unchanged. It refuses a machine where tandem is
# installed, and leaves the machine as it found it.
test-package: build
	packaging/deb/test-package.sh

# Partitions on a real network: each node in its own network namespace, links
# cut with nftables (needs root). Not part of `test`: CI runs it where the
# machine allows namespaces (.ci/run).
test-partitions: build
	TANDEM_PROVIDER=$(CURDIR)/$(PROVIDER) $(CARGO) test --release -p tandem-cluster-tests --test partitions --test consistency -- --ignored --test-threads=1 --skip list_append_matrix

# The WAN emulator's self-tests: sites in network namespaces joined by
# `tandem wan emulate`, probed (round trip, loss, rate, order); then a
# 2+1 cluster 50 ms apart through a cut, a heal and a lossy link, with
# the bank ledger (needs root; 70 s).
# Not part of `test`: CI runs it where the machine allows namespaces (.ci/run).
test-wan: build
	TANDEM_PROVIDER=$(CURDIR)/$(PROVIDER) $(CARGO) test --release -p tandem-cluster-tests --test wan_emulator --test wan_sites -- --ignored --test-threads=1

# The list-append matrix (docs/consistency.md): every fault, flush setting
# and isolation of tests/cluster/src/la_matrix.rs on Tandem and on Galera,
# one fresh cluster each (root, network namespaces; 16 minutes on the 2-core
# development VM). Writes its rows into the table of docs/consistency.md (a row of
# the same cell replaced, others kept). TANDEM_LA_FAULTS=a,b
# runs only those faults, TANDEM_LA_PROVIDERS=tandem only one provider.
consistency: build
	TANDEM_PROVIDER=$(CURDIR)/$(PROVIDER) TANDEM_LA_TABLE=$(CURDIR)/docs/consistency.md \
		$(CARGO) test --release -p tandem-cluster-tests --test consistency list_append_matrix -- \
		--ignored --test-threads=1 --nocapture

# A fast subset of MariaDB's own galera suite (tests/mtr/ci.txt) against our provider.
test-mtr: build
	$(LAB) mtr --providers tandem --tandem-path $(CURDIR)/$(PROVIDER) --list tests/mtr/ci.txt --no-doc --expect-pass

# MariaDB's galera, galera_3nodes and galera_sr suites, whole, with Galera and
# with Tandem (hours: every test of three suites, once per provider); writes docs/compatibility.md.
mtr: build
	$(LAB) mtr --tandem-path $(CURDIR)/$(PROVIDER)

# Tandem, Galera and standalone MariaDB side by side under sysbench; writes
# docs/benchmarks.md (+ .json, compared with on the next run). Needs an idle machine.
# Beside the matrix, the rejoin scenario and the 1-node cell: causal reads, flow
# control with a slow node, one 100 MiB streaming transaction, and what TLS costs.
bench: build
	$(LAB) bench --causal-cell --fc-cell --stream-cell --tls-cell

# The same in a few minutes, report under .tandem/bench/ (a smoke, not a measurement).
bench-quick: build
	$(LAB) bench --quick

clean:
	$(CARGO) clean
