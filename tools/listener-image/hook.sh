#!/bin/sh
# build.sh's mmdebstrap --extract-hook: runs once Debian's packages are unpacked into the root filesystem ($1),
# as root (or as root of mmdebstrap's user namespace, rootless), with build.sh's settings in its environment and
# what it installs (uv, the wheels, constraints.txt, this script) in $1/tmp/install, which it removes.
set -eu
rootfs=$1
: "${VERSION:?}" "${LOADER:?}" "${VENV:?}" "${HOME_DIR:?}" "${USER_ID:?}" "${SOURCE_DATE_EPOCH:?}"

# The package database that scanners read (the packages are unpacked, not installed: no dpkg in the image), of
# the .debs mmdebstrap unpacked (MMDEBSTRAP_ESSENTIAL; its cache holds older ones too).
for deb in $(printf '%s\n' ${MMDEBSTRAP_ESSENTIAL:?} | sort); do
  dpkg-deb --field "$rootfs$deb" Package Version Architecture Multi-Arch Source Installed-Size Maintainer Depends \
    Pre-Depends Description | sed '1a Status: install ok installed'
  echo
done >"$rootfs/var/lib/dpkg/status"

# What the listener does not need: manuals, translations, documentation (each package's copyright stays), and
# this machine's resolv.conf and hostname (mmdebstrap's copies; a container gets its own).
rm -rf "$rootfs/usr/share/man" "$rootfs/usr/share/info" "$rootfs/usr/share/locale" "$rootfs/usr/share/lintian"
find "$rootfs/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
find "$rootfs/usr/share/doc" -mindepth 1 -type d -empty -delete
rm -f "$rootfs/etc/resolv.conf" "$rootfs/etc/hostname"
# apt's lists and cache (apt ran outside; build.sh skips mmdebstrap's cleanup of them), after build.sh's sync-out
# of its .debs; /etc/apt stays, its sources.list saying where the packages came from.
rm -rf "$rootfs/var/lib/apt" "$rootfs/var/cache/apt"

# The listener's user, and its home, which is its working directory.
printf 'root:x:0:0:root:/root:/usr/sbin/nologin\nlistener:x:%s:%s:listener:%s:/usr/sbin/nologin\n' \
  "$USER_ID" "$USER_ID" "$HOME_DIR" >"$rootfs/etc/passwd"
printf 'root:x:0:\nlistener:x:%s:\n' "$USER_ID" >"$rootfs/etc/group"
mkdir -p "$rootfs$HOME_DIR"
chown "$USER_ID:$USER_ID" "$rootfs$HOME_DIR"
chmod 0755 "$rootfs$HOME_DIR"

# The standard library compiled, as Debian's postinst would have: -f, so that each .pyc is compileall's
# (SOURCE_DATE_EPOCH makes it a hash-checked one), not one the interpreter wrote for a module it imported itself
# (timestamp-based; rootless, the modules compileall imports had those, and the image another digest); -j 1, one
# process, whose imports are the same at every build (marshal writes an object otherwise when something else
# refers to it). Then the virtualenv, and in it the package and its dependencies, offline, compiled by uv.
# UV_NO_INSTALLER_METADATA: no uv_cache.json in each .dist-info (it holds the time uv unpacked the wheel, so no
# two builds would agree), nor INSTALLER or direct_url.json. uv and the wheels go again.
chroot "$rootfs" /usr/bin/python3.11 -m compileall -q -f -j 1 /usr/lib/python3.11 >/dev/null
chroot "$rootfs" /usr/bin/python3.11 -m venv --without-pip "$VENV"
excludes=
if [ -s "$rootfs/tmp/install/excludes.txt" ]; then excludes="--excludes /tmp/install/excludes.txt"; fi
# shellcheck disable=SC2086 # $excludes: an option and its value, or nothing
HOME=/tmp/install UV_CACHE_DIR=/tmp/install/cache UV_NO_INSTALLER_METADATA=1 chroot "$rootfs" /tmp/install/uv \
  pip install --quiet --no-config --offline --no-index --find-links /tmp/install/wheels --python "$VENV/bin/python" \
  --link-mode copy --compile-bytecode -c /tmp/install/constraints.txt $excludes "pulumi-actions-runners==$VERSION"
rm -rf "$rootfs/tmp/install"
# The wheel's other programs, which the listener never runs: the simulator (a package of its own in the wheel) and
# the provider plugin's launcher (it needs the Pulumi SDK, left out above). Their RECORD lines stay.
rm -rf "$rootfs$VENV/lib/python3.11/site-packages/actions_runners_simulator" \
  "$rootfs$VENV/bin/actions-runners-simulator" "$rootfs$VENV/bin/pulumi-resource-actions-runners"

# Checks, in the image as its user: every shared library the wheels' extensions link is there (the image's own
# loader says, for those the listener does not import too), the listener's imports (kubernetes, which it imports
# when first used, included) without the packages build.sh leaves out, and its entry point, which, given none of
# the settings its Deployment gives it, says so and exits 1. Nothing is written (root owns it all).
missing=$(find "$rootfs$VENV" -name '*.so*' -type f | while read -r library; do
  inside=${library#"$rootfs"}
  chroot "$rootfs" "$LOADER" --list "$inside" 2>&1 | sed -n -e "s|^\s*\(\S*\) => not found|$inside: \1|p" \
    -e "s|.*error while loading shared libraries: \([^:]*\):.*|$inside: \1|p"
done)
if [ -n "$missing" ]; then
  printf 'hook.sh: libraries missing from the image (add their Debian packages to build.sh):\n%s\n' "$missing" >&2
  exit 1
fi
chroot=$(command -v chroot)
in_image() {
  env -i PATH="$VENV/bin:/usr/bin:/bin" HOME="$HOME_DIR" LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1 \
    "$chroot" --userspec="$USER_ID:$USER_ID" "$rootfs" "$@"
}
in_image python -c "
import sys
import pulumi_actions_runners.listener.__main__
from pulumi_actions_runners.kube.library import kubernetes
kubernetes()
left_out = [name for name in '${WITHOUT:-}'.replace('-', '_').split() if name in sys.modules]
assert not left_out, f'the listener imported {left_out}, which build.sh leaves out of the image (WITHOUT)'
"
if said=$(in_image actions-runners-listener 2>&1); then
  echo "hook.sh: actions-runners-listener exited 0 without its settings: $said" >&2
  exit 1
fi
case $said in
*"is not set"*) ;;
*)
  echo "hook.sh: actions-runners-listener, without its settings, said: $said" >&2
  exit 1
  ;;
esac
