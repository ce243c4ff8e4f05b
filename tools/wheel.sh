#!/usr/bin/env bash
# Builds the package's wheel and sdist into OUT (default dist/) and prints the wheel's path on its last line, for
# `pip install WHEEL -c constraints.txt` in a virtualenv of your own. Built from a copy of provider/, so that the
# checkout gains no build/ or *.egg-info (only OUT).
set -euo pipefail
. "$(dirname "$0")/package.sh" "${1:-}"
"$python" -m build --quiet --wheel --sdist --outdir "$out" "$work/source" >&2
echo "$out/pulumi_actions_runners-$version-py3-none-any.whl"
