#!/usr/bin/env bash
# Writes sdk/schema.json from the provider's property table and the SDKs `pulumi package gen-sdk` makes of it
# (sdk/nodejs, sdk/go, sdk/python; no C#: docs/how-to/other-languages.md says why), with the CLI and language hosts
# of `make tools` on PATH.
# OUT (default sdk/) is where; tests/test_plugin_sdks.py generates into a temporary folder and compares.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-$root/sdk}
python=${PYTHON:-$root/.venv/bin/python}
mkdir -p "$out"
"$python" -m pulumi_actions_runners.plugin.schema >"$out/schema.json"
version=$("$python" -c 'import pulumi_actions_runners as p; print(p.__version__)')
for language in nodejs go python; do
  pulumi package gen-sdk "$out/schema.json" --language "$language" --version "$version" --out "$out" >&2
done
