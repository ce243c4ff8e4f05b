#!/usr/bin/env bash
# Puts a pulumi CLI and its Python language host in one folder and prints that folder, for PATH.
#
# Uses a pulumi already on PATH when it is this version and has the Python host beside it; else builds both
# from Go modules (this folder's go.mod) with CGO_ENABLED=0 -trimpath into a cache outside the repository, so
# later runs take seconds. The CLI version matches the Python SDK pinned in requirements.txt: the newest release
# both PyPI and the Go module proxy serve.
set -euo pipefail

VERSION=3.260.0
here=$(cd "$(dirname "$0")" && pwd)

if existing=$(command -v pulumi 2>/dev/null) && [ "$(pulumi version 2>/dev/null)" = "v$VERSION" ]; then
  dir=$(dirname "$existing")
  if [ -x "$dir/pulumi-language-python" ] && [ -x "$dir/pulumi-language-python-exec" ] &&
    [ -x "$dir/pulumi-resource-pulumi-python" ]; then
    echo "$dir"
    exit 0
  fi
fi

key=$({ cat "$here/go.mod" "$here/go.sum" "$here/language-python/main.go" "$0"; go env GOVERSION GOOS GOARCH; } |
  sha256sum | cut -c1-12)
cache="${PULUMI_CLI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pulumi-actions-runners}/pulumi-v$VERSION-$key"
if [ -x "$cache/pulumi" ]; then
  echo "$cache"
  exit 0
fi

echo "building pulumi v$VERSION and its Python language host into $cache (once; a cold build takes minutes)" >&2
started=$(date +%s)
mkdir -p "$(dirname "$cache")"
work=$(mktemp -d "${cache}.XXXX")
trap 'rm -rf "$work"' EXIT
cd "$here"
export CGO_ENABLED=0
go build -trimpath -o "$work/pulumi" \
  -ldflags "-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v$VERSION" \
  github.com/pulumi/pulumi/pkg/v3/cmd/pulumi
go build -trimpath -o "$work/pulumi-language-python" -ldflags "-X main.version=$VERSION" ./language-python
sdk=$(go list -m -f '{{.Dir}}' github.com/pulumi/pulumi/sdk/v3)
install -m 0755 "$sdk/python/cmd/pulumi-language-python-exec" "$sdk/python/dist/pulumi-resource-pulumi-python" "$work/"
# Another build may have finished first: keep that one (mv -T will not replace a non-empty folder).
if mv -T "$work" "$cache" 2>/dev/null; then
  trap - EXIT
fi
echo "built in $(($(date +%s) - started)) s" >&2
echo "$cache"
