#!/usr/bin/env bash
# What build.sh needs from Debian (mmdebstrap, umoci), installed by apt-get where they are missing: as root, or
# through sudo when it asks no password (CI). Elsewhere it says what to run and fails. `make test` runs it first
# (every simulator of the suite runs the listener from its image); `make demo` does not (without the image, the
# simulator runs the listener's program itself).
set -euo pipefail
missing=()
for tool in mmdebstrap umoci; do command -v "$tool" >/dev/null || missing+=("$tool"); done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  echo "the listener image needs ${missing[*]}: run \`sudo apt-get install ${missing[*]}\`, then this again" >&2
  exit 1
fi
command -v apt-get >/dev/null || {
  echo "the listener image needs ${missing[*]} (Debian packages), and this machine has no apt-get" >&2
  exit 1
}
echo "installing ${missing[*]} (apt-get), for the listener image" >&2
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get install -y -q "${missing[@]}" >&2 ||
  { "${as_root[@]}" apt-get update -q >&2 && "${as_root[@]}" apt-get install -y -q "${missing[@]}" >&2; }
