#!/usr/bin/env bash
# Puts pulumi-language-yaml, Pulumi's YAML language host (runtime: yaml), in a folder and prints that folder,
# for PATH.
#
# Unlike Pulumi's own Node.js and Python hosts, it lives in a module of its own, which the Go module proxy serves,
# so it is built from Go modules (this folder's go.mod) with CGO_ENABLED=0 -trimpath into a cache outside the
# repository (tools/cache.sh); later runs take milliseconds. The host reports its version only over gRPC, so one on
# PATH is not taken. The version ldflag is the one pulumi-yaml's .goreleaser.yml sets, so GetPluginInfo reports it.
set -euo pipefail

VERSION=1.25.0
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../cache.sh"

cd "$here"
root=${PULUMI_YAML_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pulumi-actions-runners}
cache=$(cache_folder "$root" "pulumi-yaml-v$VERSION" go.mod go.sum tools.go build.sh)
if [ -x "$cache/pulumi-language-yaml" ]; then
  echo "$cache"
  exit 0
fi

build() {
  CGO_ENABLED=0 go build -trimpath -o "$1/pulumi-language-yaml" \
    -ldflags "-s -w -X github.com/pulumi/pulumi-yaml/pkg/version.Version=v$VERSION" \
    github.com/pulumi/pulumi-yaml/cmd/pulumi-language-yaml
}
build_into "$cache" "pulumi-language-yaml v$VERSION" build
echo "$cache"
