#!/usr/bin/env bash
# Puts actionlint (the suite validates programs/gitops' workflow with it) in a folder and prints that folder.
# Built from the Go module pinned in go.mod into a cache outside the repository (tools/cache.sh).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
. "$here/../cache.sh"

cd "$here"
root=${ACTIONLINT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pulumi-actions-runners}
cache=$(cache_folder "$root" "actionlint" go.mod go.sum tools.go build.sh)
if [ -x "$cache/actionlint" ]; then
  echo "$cache"
  exit 0
fi

build() {
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$1/actionlint" github.com/rhysd/actionlint/cmd/actionlint
}
build_into "$cache" actionlint build
echo "$cache"
