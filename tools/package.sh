# Sourced by tools/wheel.sh and tools/plugin/build.sh (`. package.sh OUT`), which build from the package: the
# checkout ($root), the Python that builds ($python: .venv's, or $PYTHON), the package's version ($version), where
# the result goes ($out: OUT, default dist/), and a scratch folder ($work, removed at exit) whose source/ is a copy
# of provider/, so that the checkout gains no build/ or *.egg-info.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=$(mkdir -p "${1:-$root/dist}" && cd "${1:-$root/dist}" && pwd)
python=${PYTHON:-$root/.venv/bin/python}
version=$("$python" -c 'import importlib.metadata as m; print(m.version("pulumi-actions-runners"))')
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$root/provider" "$work/source"
rm -rf "$work/source/build" "$work/source/"*.egg-info
