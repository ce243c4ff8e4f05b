#!/usr/bin/env bash
# Puts pulumi-resource-kubernetes (the plugin behind the pulumi_kubernetes Python SDK) in a folder and prints that
# folder; the simulator's workspaces install it from there under the version the SDK asks for.
#
# Builds it from Go modules into a cache outside the repository (tools/cache.sh); the plugin cannot report its
# version, so one on PATH is not taken. The module's command embeds a versioned copy of its schema that its own
# build generates first (go:generate), so the command is copied out of the module cache, generated, then built.
# VERSION is the plugin version the pinned Python SDK asks for (its pulumi-plugin.json).
set -euo pipefail

VERSION=4.25.0-alpha.1768448096
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../cache.sh"

cd "$here"
root=${PULUMI_KUBERNETES_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pulumi-actions-runners}
cache=$(cache_folder "$root" "pulumi-kubernetes-v$VERSION" go.mod go.sum tools.go build.sh)
if [ -x "$cache/pulumi-resource-kubernetes" ]; then
  echo "$cache"
  exit 0
fi

build() {
  local src="$1/src"  # removed before the folder is published
  mkdir -p "$src/cmd"
  cp "$here/go.mod" "$here/go.sum" "$src/"
  go mod download github.com/pulumi/pulumi-kubernetes/provider/v4  # a fresh module cache has no folder to list yet
  local module
  module=$(go list -m -f '{{.Dir}}' github.com/pulumi/pulumi-kubernetes/provider/v4)
  cp "$module/cmd/pulumi-resource-kubernetes/"{main.go,generate.go,schema.json,terraform-mapping.json} "$src/cmd/"
  chmod u+w "$src/cmd/"*
  (
    cd "$src/cmd"
    VERSION=$VERSION go run generate.go
    CGO_ENABLED=0 go build -trimpath -o "$1/pulumi-resource-kubernetes" \
      -ldflags "-s -w -X github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version=$VERSION" .
  )
  rm -rf "$src"
}
build_into "$cache" "pulumi-resource-kubernetes v$VERSION" build
echo "$cache"
