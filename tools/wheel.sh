#!/usr/bin/env bash
# Builds the package's wheel and sdist into OUT (default dist/) and prints the wheel's path on its last line, for
# `pip install WHEEL -c constraints.txt` in a virtualenv of your own. Built from a copy of provider/, so that the
# checkout gains no build/ or *.egg-info (and may be read-only).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
out=$(mkdir -p "${1:-$root/dist}" && cd "${1:-$root/dist}" && pwd)
python=${PYTHON:-$root/.venv/bin/python}
version=$("$python" -c 'import importlib.metadata as m; print(m.version("pulumi-actions-runners"))')

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$root/provider" "$work/source"
rm -rf "$work/source/build" "$work/source/"*.egg-info
"$python" -m build --quiet --wheel --sdist --outdir "$out" "$work/source" >&2
echo "$out/pulumi_actions_runners-$version-py3-none-any.whl"
