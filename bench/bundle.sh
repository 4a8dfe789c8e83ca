#!/usr/bin/env bash
# The hydrate bundle's size, built as `cargo leptos build --release` builds it (the
# `wasm-release` profile, wasm-bindgen, then wasm-opt -Oz with cargo-leptos's flags), without
# building the release server. Prints the wasm's and the JS glue's sizes, raw and gzip -9.
#
#   bench/bundle.sh              # this checkout
#   BUNDLE_REV=<rev> bench/bundle.sh   # also a past commit, built in a worktree, side by side
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/durable/target}"
unset RUSTFLAGS
wasm_opt="$PWD/node_modules/.bin/wasm-opt"

# Builds the bundle of the checkout at $1 into $2 and prints its sizes under label $3.
bundle() {
  local src=$1 out=$2 label=$3
  # The flag cargo-leptos adds to a release build when the checkout asks for erased components.
  local flags=""
  if grep -q '^always-erase-components = true' "$src/Cargo.toml"; then
    flags="--cfg erase_components"
  fi
  local wasm
  wasm=$(cd "$src" && RUSTFLAGS="$flags" cargo build --quiet -p app --lib --target wasm32-unknown-unknown \
    --profile wasm-release --no-default-features --features hydrate \
    --message-format=json-render-diagnostics | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "app":
        print(*[f for f in m["filenames"] if f.endswith(".wasm")])')
  wasm-bindgen --target web --no-typescript --out-dir "$out" --out-name durable "$wasm"
  "$wasm_opt" -Oz --enable-bulk-memory --enable-nontrapping-float-to-int \
    "$out/durable_bg.wasm" -o "$out/durable_bg.wasm"
  for f in durable_bg.wasm durable.js; do
    printf '| %-10s | %-15s | %9d | %9d |\n' "$label" "$f" \
      "$(stat -c %s "$out/$f")" "$(gzip -9 -c "$out/$f" | wc -c)"
  done
}

printf '| %-10s | %-15s | %9s | %9s |\n' build file bytes gzip
printf '|%s|%s|%s|%s|\n' ------------ ----------------- ----------- -----------
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -n "${BUNDLE_REV:-}" ]; then
  git worktree add -f --detach "$work/old" "$BUNDLE_REV" >/dev/null 2>&1
  # A target directory of its own: cargo would take the other checkout's artifacts for fresh
  # (a workspace's crates hash the same wherever it is checked out).
  CARGO_TARGET_DIR="$CARGO_TARGET_DIR/bundle-old" \
    bundle "$work/old" "$work/old-pkg" "$(git rev-parse --short "$BUNDLE_REV")"
  git worktree remove --force "$work/old"
fi
bundle "$PWD" "$work/new-pkg" "this"
