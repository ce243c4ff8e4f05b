#!/usr/bin/env bash
# Builds the RunnerScaleSet listener's OCI image, as an OCI image layout folder (its tag: the package's version),
# and prints "PATH DIGEST SIZE" on its last line: the folder, the image's digest (its manifest's) and the bytes a
# registry stores for it (manifest, config, compressed layer). `skopeo copy oci:PATH:VERSION docker://REGISTRY/...`
# publishes it; actions_runners_simulator/oci_image.py reads it (the test bed runs the listener from its entrypoint and Env).
#
# No base image is pulled. The root filesystem is Debian bookworm's python3.11 and the libraries it links, unpacked
# by mmdebstrap (--variant=extract: no maintainer scripts run, and no dpkg, apt or shell in the image), and a
# virtualenv, /opt/listener, holding the package's wheel (tools/wheel.sh) and its dependencies at constraints.txt's
# pins, installed offline by uv (constraints.txt's) run in that root filesystem (hook.sh, which then checks the
# image). umoci makes that tar the image's one layer and writes its config: Entrypoint actions-runners-listener,
# no Cmd, User 1000:1000, WorkingDir its home. Rootless: mmdebstrap's unshare mode needs user namespaces and, for a
# user other than root, a range in /etc/subuid and /etc/subgid; umoci needs neither.
#
# Left out (WITHOUT, by uv's --excludes, with what only they need): the Pulumi SDK, which the listener does not
# import (grpcio, protobuf, opentelemetry, debugpy, dill... go with it), and aiohttp, which only the kubernetes
# library's asyncio client imports (kubernetes.aio; the listener's client is the other one). hook.sh checks, in the
# image, that the listener's imports hold without them and import none of them. WITHOUT= builds the whole
# dependency set (and adds libstdc++6, which grpcio links).
#
# Reproducible: every date is SOURCE_DATE_EPOCH (default: the last commit's time), so two builds of one tree
# against one state of Debian's mirror give one digest. The mirror moves (point releases, security updates) and no
# snapshot mirror is reachable here, so a later build of the same commit can differ by its Debian packages, whose
# versions the image's /var/lib/dpkg/status lists.
#
#   build.sh [OUT]   into OUT (replaced), else into a cache folder named by a hash of what goes in (provider/'s
#                    files, constraints.txt, this folder, tools/wheel.sh, SOURCE_DATE_EPOCH, WITHOUT...), where a
#                    later build finds it at once.
# Debian's .debs and PyPI's wheels are cached too (the cache root's listener-image-debs/, and pip's own cache).
# What goes into the root filesystem goes by mmdebstrap's special hooks (copy-in, sync-in, sync-out), which work
# across its user namespace, where its root cannot read this user's files.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
python=${PYTHON:-$root/.venv/bin/python}
uv=${UV:-$(dirname "$python")/uv}
without=${WITHOUT-pulumi aiohttp aiohttp-retry}
suite=bookworm # its python3 is 3.11, as requires-python allows
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
security=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
# The interpreter and its standard library; base-files for /etc/os-release and the usual folders (it pre-depends on
# awk: mawk comes too); install-info only stands in for dpkg, which readline-common (a dependency of libreadline8,
# which the standard library's readline module links) wants, either of the two.
packages=python3.11-minimal,libpython3.11-stdlib,base-files,install-info
case " $without " in
*" pulumi "*) ;;
*) packages=$packages,libstdc++6 ;; # grpcio's C++ runtime
esac
export VENV=/opt/listener HOME_DIR=/home/listener USER_ID=1000 WITHOUT=$without
started=$(date +%s)

for tool in mmdebstrap umoci dpkg-deb; do
  command -v "$tool" >/dev/null || {
    echo "build.sh: $tool is missing (apt-get install mmdebstrap umoci)" >&2
    exit 1
  }
done
arch=$(dpkg --print-architecture)
case $arch in
amd64) platform=x86_64 LOADER=/lib64/ld-linux-x86-64.so.2 ;;
arm64) platform=aarch64 LOADER=/lib/ld-linux-aarch64.so.1 ;;
*)
  echo "build.sh: no wheels for $arch here" >&2
  exit 1
  ;;
esac
export LOADER LC_ALL=C # LC_ALL: the hook's globs in one order
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct)}
created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
revision=$(git -C "$root" rev-parse HEAD)
if [ -n "$(git -C "$root" status --porcelain -- provider constraints.txt tools/listener-image tools/wheel.sh tools/package.sh)" ]; then
  revision=$revision-dirty # what is built is not the commit's
fi
cache_root=${LISTENER_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pulumi-actions-runners}
export DEBS=$cache_root/listener-image-debs
mkdir -p "$DEBS"

export VERSION
VERSION=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/provider/pyproject.toml")
key=$({
  cd "$root"
  find provider -type f ! -path '*/__pycache__/*' ! -path '*.egg-info/*' ! -path 'provider/build/*' | sort |
    xargs sha256sum
  sha256sum constraints.txt tools/wheel.sh tools/package.sh tools/listener-image/*
  echo "$SOURCE_DATE_EPOCH $revision $arch $without $suite $mirror $security"
} | sha256sum | cut -c1-12)
out=${1:-$cache_root/listener-image-$VERSION-$key}
if [ -z "${1:-}" ]; then
  if [ -f "$out/index.json" ]; then
    echo "$out $("$python" -m actions_runners_simulator.oci_image "$out" --digest-size)"
    exit 0
  fi
  # As tools/cache.sh's build_into says it (the test bed's tool builds read this line).
  echo "building the listener image into $out (once; a cold build takes about a minute)" >&2
fi

export WORK
WORK=$(mktemp -d)
staged=
trap 'rm -rf "$WORK" ${staged:+"$staged"}' EXIT
echo "listener image: the wheel of pulumi-actions-runners $VERSION (tools/wheel.sh)" >&2
wheel=$(PYTHON=$python "$root/tools/wheel.sh" "$WORK/dist" 2>"$WORK/wheel.log" | tail -n 1) || {
  cat "$WORK/wheel.log" >&2
  exit 1
}
[ "$(basename "$wheel")" = "pulumi_actions_runners-$VERSION-py3-none-any.whl" ] || {
  echo "build.sh: tools/wheel.sh built $wheel, not version $VERSION" >&2
  exit 1
}

# The dependencies' wheels for the image's Python and platform (not this machine's): binary only, at the pins.
echo "listener image: the wheels of its dependencies" >&2
platforms=() # what Debian bookworm's glibc 2.36 runs, down to manylinux1 (pip does not list the older ones itself)
for minor in $(seq 36 -1 5); do platforms+=(--platform "manylinux_2_${minor}_$platform"); done
platforms+=(--platform "manylinux2014_$platform" --platform "manylinux2010_$platform" --platform "manylinux1_$platform")
mkdir "$WORK/install"
"$python" -m pip download --quiet --disable-pip-version-check --dest "$WORK/install/wheels" \
  -c "$root/constraints.txt" --only-binary=:all: --implementation cp --python-version 3.11 --abi cp311 \
  "${platforms[@]}" "$wheel" >&2
cp "$uv" "$root/constraints.txt" "$here/hook.sh" "$WORK/install/"
printf '%s\n' $without >"$WORK/install/excludes.txt"

echo "listener image: the root filesystem (mmdebstrap $suite: $packages; hook.sh)" >&2
mmdebstrap --quiet --variant=extract --include="$packages" --skip=output/dev --skip=cleanup/apt \
  --setup-hook='mkdir -p "$1/var/cache/apt/archives"' --setup-hook="sync-in $DEBS /var/cache/apt/archives" \
  --extract-hook="sync-out /var/cache/apt/archives $DEBS" --extract-hook="copy-in $WORK/install /tmp" \
  --extract-hook='sh "$1/tmp/install/hook.sh" "$1"' \
  "$suite" "$WORK/rootfs.tar" \
  "deb $mirror $suite main" "deb $mirror $suite-updates main" "deb $security $suite-security main" >&2

echo "listener image: the OCI layout (umoci)" >&2
image=$WORK/layout:$VERSION
umoci init --layout "$WORK/layout"
umoci new --image "$image"
umoci raw add-layer --image "$image" --history.created "$created" \
  --history.created_by "tools/listener-image/build.sh: mmdebstrap $suite ($packages); pulumi-actions-runners $VERSION" \
  "$WORK/rootfs.tar"
umoci config --image "$image" --no-history --created "$created" --os linux --architecture "$arch" \
  --config.entrypoint actions-runners-listener --clear config.cmd \
  --config.user "$USER_ID:$USER_ID" --config.workingdir "$HOME_DIR" \
  --config.env "PATH=$VENV/bin:/usr/local/bin:/usr/bin:/bin" --config.env "HOME=$HOME_DIR" \
  --config.env LANG=C.UTF-8 --config.env PYTHONUNBUFFERED=1 --config.stopsignal SIGTERM \
  --config.label org.opencontainers.image.title=actions-runners-listener \
  --config.label "org.opencontainers.image.description=The listener of a RunnerScaleSet (pulumi-actions-runners)" \
  --config.label "org.opencontainers.image.version=$VERSION" \
  --config.label "org.opencontainers.image.revision=$revision" \
  --config.label "org.opencontainers.image.created=$created"
umoci gc --layout "$WORK/layout"
chmod -R a+rX "$WORK/layout" # umoci writes blobs 0600
mkdir -p "$(dirname "$out")"
if [ -n "${1:-}" ]; then
  rm -rf "$out"
  mv "$WORK/layout" "$out"
else # beside the cache folder first, then renamed: another build that finished first keeps its (same) image
  staged=$(mktemp -d "$out.XXXX")
  mv "$WORK/layout" "$staged/layout"
  mv -T "$staged/layout" "$out" 2>/dev/null || true
fi
echo "listener image built in $(($(date +%s) - started)) s: $("$python" -m actions_runners_simulator.oci_image "$out" --summary)" >&2
echo "$out $("$python" -m actions_runners_simulator.oci_image "$out" --digest-size)"
