#!/usr/bin/env bash
# Puts pulumi-language-nodejs and pulumi-language-go in one folder and prints that folder, for PATH beside
# tools/pulumi/build.sh's: the language hosts `pulumi package gen-sdk --language nodejs|go` needs, and the one that
# runs TypeScript/JavaScript programs (main.go says why they are built here).
#
# One Go binary, built with CGO_ENABLED=0 -trimpath from this folder's go.mod (the pkg/v3 and sdk/v3 versions of
# tools/pulumi/go.mod, so the Go build cache is shared) into a cache outside the repository (tools/cache.sh), and
# linked under the two names; the name it is started under picks the language. Beside them the SDK's
# pulumi-resource-pulumi-nodejs script, which runs Node.js dynamic providers. Later runs take milliseconds.
set -euo pipefail

VERSION=3.260.0
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../cache.sh"

cd "$here"
root=${PULUMI_LANGUAGES_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pulumi-actions-runners}
cache=$(cache_folder "$root" "pulumi-languages-v$VERSION" go.mod go.sum build.sh ./*.go)
if [ -x "$cache/pulumi-language-nodejs" ]; then
  echo "$cache"
  exit 0
fi

build() {
  CGO_ENABLED=0 go build -trimpath -o "$1/pulumi-language-nodejs" -ldflags "-X main.version=$VERSION" .
  ln "$1/pulumi-language-nodejs" "$1/pulumi-language-go"
  # The provider that runs a Node.js program's dynamic resources (pulumi.dynamic.Resource): the SDK's own script.
  local sdk
  sdk=$(go list -m -f '{{.Dir}}' github.com/pulumi/pulumi/sdk/v3)
  install -m 0755 "$sdk/nodejs/dist/pulumi-resource-pulumi-nodejs" "$1/"
}
build_into "$cache" "the pulumi v$VERSION nodejs and go language hosts" build
echo "$cache"
