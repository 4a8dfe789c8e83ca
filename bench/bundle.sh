#!/usr/bin/env bash
# The hydrate bundle's size, built as `make build-release` builds it (`cargo leptos build
# --release --split`: the `wasm-release` profile, the lazy routes split into chunks of their
# own, wasm-bindgen, wasm-opt -Oz), without building the release server. Prints, raw and
# gzip -9: the main wasm and JS every page loads, and for each lazily loaded route what a first
# visit to it fetches in all (the main wasm, the route's chunk and the chunks it shares).
#
#   bench/bundle.sh                    # this checkout
#   BUNDLE_REV=<rev> bench/bundle.sh   # also a past commit, built in a worktree, side by side
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/durable/target}"
unset RUSTFLAGS
# The Makefile's settings for cargo-leptos (it would otherwise minify the JS in release).
export LEPTOS_OUTPUT_NAME=durable LEPTOS_SITE_PKG_DIR=pkg LEPTOS_HASH_FILES=false LEPTOS_JS_MINIFY=false
[ -d node_modules ] || { echo "node_modules is missing: run scripts/setup.sh first" >&2; exit 1; }

# Builds the bundle of the checkout at $1 into the site root $2 and prints its sizes under $3.
bundle() {
  local src=$1 site=$2 label=$3
  (cd "$src" && LEPTOS_SITE_ROOT="$site" cargo leptos build --release --split --frontend-only \
    >"$site.log" 2>&1) || { tail -20 "$site.log"; return 1; }
  python3 - "$site/pkg" "$label" <<'PY'
import gzip, json, os, re, sys
pkg, label = sys.argv[1:]
def size(name):
    data = open(os.path.join(pkg, name), "rb").read()
    return len(data), len(gzip.compress(data, 9))
def row(what, raw, gz):
    print(f"| {label:<10} | {what:<28} | {raw:>9} | {gz:>9} |")
main = "durable_bg.wasm" if os.path.exists(os.path.join(pkg, "durable_bg.wasm")) else "durable.wasm"
main_raw, main_gz = size(main)
row("main wasm", main_raw, main_gz)
row("main js", *size("durable.js"))
loader = "__wasm_split.______________________.js"
if os.path.exists(os.path.join(pkg, loader)):
    row("chunk loader js", *size(loader))
manifest = os.path.join(pkg, "__wasm_split_manifest.json")
if os.path.exists(manifest):
    for split, chunks in sorted(json.load(open(manifest)).items()):
        sizes = [size(c + ".wasm") for c in chunks]
        route = re.sub(r"^_+|_view_\d+$", "", split)
        row(f"{route} (+ main)", main_raw + sum(s[0] for s in sizes),
            main_gz + sum(s[1] for s in sizes))
PY
}

printf '| %-10s | %-28s | %9s | %9s |\n' build file bytes gzip
printf '|%s|%s|%s|%s|\n' ------------ ------------------------------ ----------- -----------
work=$(mktemp -d)
trap 'git worktree remove --force "$work/old" 2>/dev/null; git worktree prune; rm -rf "$work"' EXIT
if [ -n "${BUNDLE_REV:-}" ]; then
  git worktree add -f --detach "$work/old" "$BUNDLE_REV" >/dev/null
  # cargo-leptos finds wasm-opt and tailwind in node_modules (scripts/setup.sh installs them).
  ln -s "$PWD/node_modules" "$work/old/node_modules"
  # A target directory of its own: cargo would take the other checkout's artifacts for fresh
  # (a workspace's crates hash the same wherever it is checked out).
  CARGO_TARGET_DIR="$CARGO_TARGET_DIR/bundle-old" \
    bundle "$work/old" "$work/old-site" "$(git rev-parse --short "$BUNDLE_REV")"
fi
bundle "$PWD" "$work/new-site" "this"
