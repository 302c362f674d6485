#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager and etcd from Go modules and prints the directory
# that holds them, ready for KUBEBUILDER_ASSETS:
#
#   export KUBEBUILDER_ASSETS=$(tools/kube/build.sh)            # Kubernetes 1.37.2 (the default)
#   MCR_KUBE_VERSION=1.36.3 tools/kube/build.sh                  # another release
#
# Kubernetes publishes no Go-installable binaries: k8s.io/kubernetes requires its ~33 staging
# modules at v0.0.0 through replace directives, which only apply inside its own repository. The
# wrapper module beside this script (go.mod, go.sum) requires k8s.io/kubernetes and replaces each
# staging module with its published v0.<minor>.<patch>; etcd's server is built at the version
# Kubernetes' own go.mod pins, as a tool of the same module. For the default version the committed
# go.mod/go.sum are used as they are (checksums verified); for another version the wrapper module is
# derived from that release's go.mod in the cache directory.
#
# The binaries land in ${MCR_KUBE_CACHE:-~/.cache/mcr}/kube-<version>/bin; a second run with them
# present prints the directory at once. Without Go it says so in one line and exits 3.
set -euo pipefail

DEFAULT_VERSION=1.37.2
version=${MCR_KUBE_VERSION:-$DEFAULT_VERSION}
version=${version#v}
here=$(cd "$(dirname "$0")" && pwd)
cache_root=${MCR_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mcr}
out=$cache_root/kube-$version
bin=$out/bin
binaries=(kube-apiserver kube-controller-manager etcd)

have_all() {
    local b
    for b in "${binaries[@]}"; do
        [ -x "$bin/$b" ] || return 1
    done
    [ "$(cat "$bin/.stamp" 2>/dev/null)" = "$version" ]
}

if have_all; then
    echo "$bin"
    exit 0
fi

if ! command -v go >/dev/null 2>&1; then
    echo "tools/kube/build.sh: no 'go' on PATH; Go >= 1.26 is needed to build Kubernetes $version" >&2
    exit 3
fi

log() { echo "tools/kube/build.sh: $*" >&2; }

# One build at a time per version: envs started in parallel wait for the first one's binaries.
mkdir -p "$cache_root"
exec 9>"$cache_root/.kube-$version.lock"
flock 9
if have_all; then
    echo "$bin"
    exit 0
fi

# The committed go.mod/go.sum are complete: a build never rewrites them.
export GOFLAGS="${GOFLAGS:-} -mod=readonly"
export CGO_ENABLED=0
mkdir -p "$bin"
if [ "$version" = "$DEFAULT_VERSION" ]; then
    mod=$here
else
    # Another release: derive the wrapper module from that release's own go.mod.
    mod=$out/src
    mkdir -p "$mod"
    log "deriving the wrapper module for Kubernetes $version in $mod"
    kube_mod=$(go mod download -json "k8s.io/kubernetes@v$version" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
    python3 "$here/wrapper.py" "$kube_mod" "$version" >"$mod/go.mod"
    (cd "$mod" && go mod tidy >&2)
fi

# kube-apiserver reports this at /version; without it, it says v0.0.0-master.
# The release's own date, not today's, so that a rebuild links the same binaries from Go's cache.
minor=$(echo "$version" | cut -d. -f2)
build_date=$(cd "$mod" && go list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes)
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=v$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
done

log "building Kubernetes $version (kube-apiserver, kube-controller-manager, etcd) into $bin"
cd "$mod"
go build -trimpath -ldflags "$ldflags" -o "$bin/" \
    k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-controller-manager
go build -trimpath -ldflags "-s -w" -o "$bin/etcd" go.etcd.io/etcd/server/v3
echo "$version" >"$bin/.stamp"
echo "$bin"
