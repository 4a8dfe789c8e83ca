#!/usr/bin/env bash
# Installs, idempotently, what `make run` (and with `test`, `make test`) needs. Everything comes
# from crates.io, the npm registry or Debian's packages; nothing else is downloaded.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }

command -v cargo >/dev/null || { echo "cargo is missing: install Rust with rustup (https://rustup.rs) and retry"; exit 1; }
command -v npm >/dev/null || { echo "npm is missing: install Node.js 20+ (Debian: apt-get install nodejs npm) and retry"; exit 1; }

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  say "adding the wasm32-unknown-unknown target"
  rustup target add wasm32-unknown-unknown
fi

if ! cargo leptos --version 2>/dev/null | grep -q '0\.3\.10'; then
  say "installing cargo-leptos 0.3.10 (about 16 minutes on 2 cores, once)"
  cargo install cargo-leptos@0.3.10 --locked --features no_downloads
fi

wbg=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)
if ! wasm-bindgen --version 2>/dev/null | grep -q " $wbg\$"; then
  say "installing wasm-bindgen-cli $wbg (the version in Cargo.lock)"
  # Not --locked: its lock file names a crate version the registry does not serve.
  cargo install wasm-bindgen-cli --version "$wbg"
fi

if [ ! -x node_modules/.bin/tailwindcss ] || [ ! -x node_modules/.bin/wasm-opt ]; then
  say "installing Tailwind and binaryen from npm"
  npm ci --no-audit --no-fund
fi

if [ "${1:-}" = "test" ]; then
  if ! command -v cargo-nextest >/dev/null; then
    say "installing cargo-nextest"
    cargo install cargo-nextest --locked
  fi
  if [ ! -x /usr/bin/chromium ]; then
    say "installing Chromium from Debian"
    if [ "$(id -u)" = 0 ]; then
      apt-get update -qq && apt-get install -y -qq chromium
    else
      sudo apt-get update -qq && sudo apt-get install -y -qq chromium
    fi
  fi
  # The unmodified Python SDK worker from PyPI, for the interop tests, and OpenTelemetry's
  # Python SDK, with which a Python step joins its run's trace.
  venv="${DURABLE_PYVENV:-$HOME/.cache/durable/pyvenv}"
  if ! "$venv/bin/python" -c 'import durable_worker, bullmq' 2>/dev/null; then
    say "installing durable-worker[redis]==0.26.1 (PyPI) into $venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet 'durable-worker[redis]==0.26.1'
  fi
  if ! "$venv/bin/python" -c 'import opentelemetry.sdk, opentelemetry.exporter.otlp.proto.http' 2>/dev/null; then
    say "installing opentelemetry-sdk and its OTLP/HTTP exporter (PyPI) into $venv"
    "$venv/bin/pip" install --quiet 'opentelemetry-sdk==1.39.1' 'opentelemetry-exporter-otlp-proto-http==1.39.1'
  fi
  if [ ! -d end2end/node_modules/@playwright/test ]; then
    say "installing Playwright (it drives /usr/bin/chromium; no browser download)"
    (cd end2end && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund)
  fi
fi
