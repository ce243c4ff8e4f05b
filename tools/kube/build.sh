#!/usr/bin/env bash
# Puts kube-apiserver, kube-controller-manager and etcd in one folder and prints that folder: the test bed's real
# Kubernetes control plane (its API server, and the Job, garbage-collector, namespace and service-account
# controllers).
#
# Uses them from PATH when kube-apiserver there is this version and the other two are beside it; else builds them
# from Go modules (this folder's go.mod, which requires k8s.io/kubernetes and replaces its staging modules with
# their published versions) with CGO_ENABLED=0 -trimpath into a cache outside the repository (tools/cache.sh).
# A cold build takes about 11 minutes on 2 cores (kube-controller-manager adds one to the API server's).
set -euo pipefail

VERSION=v1.37.2
ETCD_VERSION=v3.7.0
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../cache.sh"

if existing=$(command -v kube-apiserver 2>/dev/null) &&
  kube-apiserver --version 2>/dev/null | grep -qx "Kubernetes $VERSION"; then
  dir=$(dirname "$existing")
  if [ -x "$dir/etcd" ] && [ -x "$dir/kube-controller-manager" ]; then
    echo "$dir"
    exit 0
  fi
fi

cd "$here"
root=${KUBE_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pulumi-actions-runners}
cache=$(cache_folder "$root" "kube-$VERSION" go.mod go.sum tools.go build.sh)
if [ -x "$cache/kube-apiserver" ] && [ -x "$cache/kube-controller-manager" ] && [ -x "$cache/etcd" ]; then
  echo "$cache"
  exit 0
fi

build() {
  export CGO_ENABLED=0
  # What `kube-apiserver --version` and the API's /version report (the release's own build sets the same).
  local pkg=k8s.io/component-base/version
  local version="-X $pkg.gitVersion=$VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=37 -X $pkg.gitTreeState=clean"
  for command in kube-apiserver kube-controller-manager; do
    go build -trimpath -o "$1/$command" -ldflags "-s -w $version -X $pkg.buildDate=1970-01-01T00:00:00Z" \
      "k8s.io/kubernetes/cmd/$command"
  done
  go build -trimpath -o "$1/etcd" -ldflags "-s -w" go.etcd.io/etcd/server/v3
}
build_into "$cache" "kube-apiserver and kube-controller-manager $VERSION and etcd $ETCD_VERSION" build
echo "$cache"
