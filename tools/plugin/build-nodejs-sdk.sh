#!/usr/bin/env bash
# Builds sdk/nodejs (generated TypeScript) into the package a program installs, as a provider's release does:
# compiled with tsc into sdk/nodejs/bin, with its package.json (version filled in) beside it. Prints that folder.
# programs/typescript depends on it (file:, copied into node_modules by its .npmrc's install-links).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
sdk=$root/sdk/nodejs
python=${PYTHON:-$root/.venv/bin/python}
version=$("$python" -c 'import pulumi_actions_runners as p; print(p.__version__)')
cd "$sdk"
npm install --no-audit --no-fund --loglevel=error >&2
npx tsc >&2
sed "s/\${VERSION}/$version/" package.json >bin/package.json
cp README.md bin/
echo "$sdk/bin"
