# Two commands for people: `make run` and `make test`. The rest are their parts.
SHELL := /bin/bash
.DEFAULT_GOAL := run

# One target directory outside the clone, shared by every build (and by CI runs).
export CARGO_TARGET_DIR ?= $(HOME)/.cache/durable/target
export LEPTOS_SITE_ROOT ?= $(CURDIR)/target/site
DATABASE_URL ?= sqlite://./data/durable.db
export DATABASE_URL
# The settings cargo-leptos compiles the server with. The Rust test build uses the same ones
# (and the same RUSTFLAGS, below) so it reuses those artifacts instead of rebuilding every crate.
# RUSTFLAGS is not exported: cargo-leptos appends its own and a doubled flag rebuilds everything.
LEPTOS_RUSTFLAGS := --cfg erase_components
export LEPTOS_OUTPUT_NAME := durable
export LEPTOS_SITE_PKG_DIR := pkg
export LEPTOS_SITE_ADDR := 127.0.0.1:3000
export LEPTOS_RELOAD_PORT := 3001
export LEPTOS_LIB_DIR := app
export LEPTOS_BIN_DIR := server
export LEPTOS_HASH_FILES := false
export LEPTOS_JS_MINIFY := false

.PHONY: run test setup setup-test build build-release test-rust test-e2e lint chaos

## run: install what is missing, build, and serve the dashboard on http://127.0.0.1:3000
## The demo's master key (which seals tenants' connection secrets) is made once, in data/.
run: setup build-release
	@mkdir -p data; [ -s data/master.key ] || (umask 077; od -An -tx1 -N32 /dev/urandom | tr -d ' \n' > data/master.key)
	@if [ -z "$$DURABLE_MASTER_KEY" ]; then export DURABLE_MASTER_KEY_FILE=$${DURABLE_MASTER_KEY_FILE:-data/master.key}; fi; \
	exec $(CARGO_TARGET_DIR)/release/durable serve --demo

## test: every suite (unit, integration, browser). The browser suite runs even when a Rust test
## failed, so one suite's failure never hides the other's result; both are reported at the end.
test: setup-test
	@rust=passed; e2e=passed; \
	$(MAKE) --no-print-directory test-rust || rust=FAILED; \
	$(MAKE) --no-print-directory test-e2e || e2e=FAILED; \
	printf '\n\033[1m==> make test: Rust suites %s, browser suite %s\033[0m\n' "$$rust" "$$e2e"; \
	[ "$$rust" = passed ] && [ "$$e2e" = passed ]

setup:
	@./scripts/setup.sh

setup-test:
	@./scripts/setup.sh test

# --split: each page's code is a wasm chunk of its own (app/src/app.rs, `lazy_page!`).
build:
	cargo leptos build --split

build-release:
	cargo leptos build --release --split

# PostgreSQL suites run against 127.0.0.1:5432 (DURABLE_TEST_POSTGRES to change it), Redis
# suites against 127.0.0.1:6379 (DURABLE_TEST_REDIS). Without a server they are skipped with one
# loud line, except in CI, where they fail. The Python interop tests use the durable-worker
# virtualenv `make setup-test` creates.
export DURABLE_PYTHON ?= $(HOME)/.cache/durable/pyvenv/bin/python
test-rust:
	@if ! (exec 3<>/dev/tcp/127.0.0.1/5432) 2>/dev/null && [ -z "$$DURABLE_TEST_POSTGRES" ] && [ -z "$$CI" ]; then \
	  echo "!!! PostgreSQL is not reachable on 127.0.0.1:5432: SKIPPING every PostgreSQL suite (start it, or set DURABLE_TEST_POSTGRES) !!!"; \
	  export DURABLE_SKIP_POSTGRES=1; \
	fi; \
	if ! (exec 3<>/dev/tcp/127.0.0.1/6379) 2>/dev/null && [ -z "$$DURABLE_TEST_REDIS" ] && [ -z "$$CI" ]; then \
	  echo "!!! Redis is not reachable on 127.0.0.1:6379: SKIPPING every Redis suite (start it, or set DURABLE_TEST_REDIS) !!!"; \
	  export DURABLE_SKIP_REDIS=1; \
	fi; \
	RUSTFLAGS="$(LEPTOS_RUSTFLAGS)" cargo nextest run --workspace --no-fail-fast

## chaos: ten minutes of SIGKILLs, restarts and pauses on a two-control-plane cluster with a
## Rust and a Python worker pool (`make test` runs one round); CHAOS_SEED replays an order
chaos: setup-test
	CHAOS_SECONDS=$${CHAOS_SECONDS:-600} RUSTFLAGS="$(LEPTOS_RUSTFLAGS)" \
	  cargo nextest run -p durable-server --test chaos --no-capture

test-e2e: build
	cd end2end && DURABLE_BIN=$(CARGO_TARGET_DIR)/debug/durable npx playwright test

lint:
	cargo fmt --all --check
	RUSTFLAGS="$(LEPTOS_RUSTFLAGS)" cargo clippy --workspace --all-targets -- -D warnings
	cargo clippy -p app --features hydrate --target wasm32-unknown-unknown -- -D warnings
