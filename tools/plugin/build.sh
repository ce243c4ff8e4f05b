#!/usr/bin/env bash
# Builds the provider plugin's archive for this platform and prints its path on its last line: the launcher
# (pulumi-resource-actions-runners) and the wheels of the package and its pinned dependencies, as
# `pulumi plugin install resource actions-runners VERSION --file ARCHIVE` takes it. OUT (default dist/) is where.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../package.sh" "${1:-}"  # $root, $out, $python, $version; $work/source, a copy of provider/
os=$(uname -s | tr '[:upper:]' '[:lower:]')
arch=$(uname -m | sed 's/x86_64/amd64/; s/aarch64/arm64/')

mkdir "$work/plugin"
cp "$here/pulumi-resource-actions-runners" "$work/plugin/"
"$python" -m pip wheel --quiet --disable-pip-version-check --wheel-dir "$work/plugin/wheels" \
  -c "$root/constraints.txt" "$work/source" >&2
archive=$out/pulumi-resource-actions-runners-v$version-$os-$arch.tar.gz
tar -czf "$archive" -C "$work/plugin" .
echo "$archive"
