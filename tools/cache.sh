# Sourced by tools/*/build.sh: where a tool's build goes, and how it gets there.

# cache_folder ROOT NAME FILE...: ROOT/NAME-KEY, KEY a hash of the FILEs (what decides the binaries), of this
# file and of the Go version, so a changed input builds anew and an unchanged one is found in milliseconds.
cache_folder() {
  local root=$1 name=$2 key
  shift 2
  key=$({ cat "$@" "${BASH_SOURCE[0]}"; go env GOVERSION GOOS GOARCH; } | sha256sum | cut -c1-12)
  echo "$root/$name-$key"
}

# build_into CACHE WHAT FUNCTION: FUNCTION builds into the folder it is given, beside CACHE, which then becomes
# CACHE. Another build may have finished first: that one is kept (mv -T will not replace a non-empty folder).
build_into() {
  local cache=$1 what=$2 build=$3 started
  echo "building $what into $cache (once; a cold build takes minutes)" >&2
  started=$(date +%s)
  mkdir -p "$(dirname "$cache")"
  work=$(mktemp -d "${cache}.XXXX")
  trap 'rm -rf "$work"' EXIT
  "$build" "$work"
  if mv -T "$work" "$cache" 2>/dev/null; then
    trap - EXIT
  fi
  echo "built $what in $(($(date +%s) - started)) s" >&2
}
