#!/usr/bin/env bash
# Puts two programs on the `scaleset` crate (crates.io, pinned in Cargo.lock) in a folder and prints that folder:
# scaleset-client (src/main.rs: one walk through the runner scale set protocol) and scaleset-autoscaler (the
# crate's own examples/autoscaler.rs, built unmodified from the crate's published source, with the crate's own
# Cargo.lock). Both are built once into a cache outside the repository (tools/cache.sh); the tests run them
# against the simulator's Actions service.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
. "$here/../cache.sh"

cd "$here"
root=${SCALESET_CLIENT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pulumi-actions-runners}
cache=$(cache_folder "$root" "scaleset-client" Cargo.toml Cargo.lock src/main.rs build.sh <(rustc -V))
if [ -x "$cache/scaleset-client" ] && [ -x "$cache/scaleset-autoscaler" ]; then
  echo "$cache"
  exit 0
fi

build() {
  # One target folder for both, so that what they share (reqwest, tokio, aws-lc) is compiled once; the debug
  # profile, as these are test tools and it builds in about half the time.
  local target="$1/target"
  cargo build --quiet --locked --manifest-path Cargo.toml --target-dir "$target"
  cp "$target/debug/scaleset-client" "$1/"
  local crate
  crate=$(cargo metadata --locked --format-version 1 --manifest-path Cargo.toml |
    python3 -c 'import json, sys; print(next(p["manifest_path"] for p in json.load(sys.stdin)["packages"] if p["name"] == "scaleset"))')
  cargo build --quiet --locked --example autoscaler --manifest-path "$crate" --target-dir "$target"
  cp "$target/debug/examples/autoscaler" "$1/scaleset-autoscaler"
  rm -rf "$target"
}
build_into "$cache" "scaleset-client and the scaleset crate's example autoscaler" build
echo "$cache"
