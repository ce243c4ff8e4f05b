#!/usr/bin/env bash
# Puts a pulumi CLI and its Python language host in one folder and prints that folder, for PATH.
#
# Uses a pulumi already on PATH when it is a v3 release at or above this version (the Python SDK pinned in
# requirements.txt, which may use its own release's engine features) and has its Python host beside it, as a
# Pulumi installation does; else builds both from Go modules (this folder's go.mod) with CGO_ENABLED=0 -trimpath
# into a cache outside the repository (tools/cache.sh), so later runs take milliseconds. VERSION is the newest
# release both PyPI and the Go module proxy serve.
set -euo pipefail

VERSION=3.260.0
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../cache.sh"

# at_least A B: version A (X.Y.Z, no v) is B or later.
at_least() {
  [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n 1)" = "$2" ]
}

if existing=$(command -v pulumi 2>/dev/null) && found=$(pulumi version 2>/dev/null) &&
  [[ $found == v3.* ]] && at_least "${found#v}" "$VERSION"; then
  dir=$(dirname "$existing")
  if [ -x "$dir/pulumi-language-python" ] && [ -x "$dir/pulumi-language-python-exec" ] &&
    [ -x "$dir/pulumi-resource-pulumi-python" ]; then
    echo "$dir"
    exit 0
  fi
fi

cd "$here"
root=${PULUMI_CLI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pulumi-actions-runners}
cache=$(cache_folder "$root" "pulumi-v$VERSION" go.mod go.sum language-python/main.go build.sh)
if [ -x "$cache/pulumi" ]; then
  echo "$cache"
  exit 0
fi

build() {
  export CGO_ENABLED=0
  go build -trimpath -o "$1/pulumi" \
    -ldflags "-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v$VERSION" \
    github.com/pulumi/pulumi/pkg/v3/cmd/pulumi
  go build -trimpath -o "$1/pulumi-language-python" -ldflags "-X main.version=$VERSION" ./language-python
  local sdk
  sdk=$(go list -m -f '{{.Dir}}' github.com/pulumi/pulumi/sdk/v3)
  install -m 0755 "$sdk/python/cmd/pulumi-language-python-exec" "$sdk/python/dist/pulumi-resource-pulumi-python" "$1/"
}
build_into "$cache" "pulumi v$VERSION and its Python language host" build
echo "$cache"
