#!/usr/bin/env bash
# Builds the Kubernetes tools of the checks and the bench (kube-apiserver,
# etcd, helm and the noop controller) from the modules pinned in tools/k8s
# into a cache outside the repository, so that a fresh clone on the same
# machine builds none of them again:
#
#   ${XDG_CACHE_HOME:-$HOME/.cache}/no8s/k8s-tools/<key>/
#
# <key> is the first 16 hex digits of the SHA-256 of tools/k8s/go.sum,
# tools/k8s/etcd/go.sum, `go version` and RECIPE below: another pin, another
# Go or another way of building is another directory. When kube-apiserver,
# etcd and helm are all there nothing is built ("cache hit"). The noop
# controller is this repository's code: it is built again whenever its
# sources differ from the ones its stamp names (seconds with a warm Go build
# cache). Every binary is built under a temporary name and renamed into place,
# so that an interrupted build leaves nothing that reads as a hit.
#
# Usage: tools/k8s/build.sh          build (or find) the tools, print the dir
#        tools/k8s/build.sh --dir    print the directory only, build nothing
# Environment: NO8S_K8S_TOOLS_NICE (default 19), the niceness of the builds.
set -euo pipefail

# The build recipe's version: change it when the flags below change, so that
# binaries built the old way are no longer hits.
RECIPE=2

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export GOWORK=off CGO_ENABLED=0 GOFLAGS=-buildvcs=false

key=$(cat "$here/go.sum" "$here/etcd/go.sum" <(go version) <(echo "recipe $RECIPE") | sha256sum | cut -c1-16)
dir=${XDG_CACHE_HOME:-$HOME/.cache}/no8s/k8s-tools/$key

if [[ ${1-} == --dir ]]; then
	echo "$dir"
	exit 0
fi

nice_level=${NO8S_K8S_TOOLS_NICE:-19}
mkdir -p "$dir"
tmp=$(mktemp -d "$dir/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
say() { echo "k8s-tools: $* ($((SECONDS - start)) s)"; }

# version MODULE: the version of MODULE in the main module's build list.
version() { (cd "$here" && go list -m -f '{{.Version}}' "$1"); }

if [[ -x $dir/kube-apiserver && -x $dir/etcd && -x $dir/helm ]]; then
	echo "k8s-tools: cache hit $dir"
else
	k8s=$(version k8s.io/kubernetes)
	helm=$(version helm.sh/helm/v4)
	minor=${k8s#v1.}
	minor=${minor%%.*}
	# Stamped as Kubernetes' release builds are (hack/lib/version.sh), the
	# build date being the release's time (the module proxy knows no commit).
	released=$(cd "$here" && go list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes)
	ld="-s -w"
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ld+=" -X $pkg.gitVersion=$k8s -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
		ld+=" -X $pkg.gitCommit= -X $pkg.buildDate=$released"
	done
	ld+=" -X helm.sh/helm/v4/internal/version.version=$helm"
	say "building kube-apiserver $k8s and helm $helm into $dir (cold: about 30 min on 2 shared cores)"
	(cd "$here" && nice -n "$nice_level" go build -trimpath -ldflags "$ld" -o "$tmp/" \
		k8s.io/kubernetes/cmd/kube-apiserver helm.sh/helm/v4/cmd/helm)
	say "built kube-apiserver and helm"
	etcd=$(cd "$here/etcd" && go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
	say "building etcd $etcd"
	(cd "$here/etcd" && nice -n "$nice_level" go build -trimpath -ldflags "-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3)
	say "built etcd"
	# Renamed only once all three are built.
	mv -f "$tmp/kube-apiserver" "$dir/kube-apiserver"
	mv -f "$tmp/helm" "$dir/helm"
	mv -f "$tmp/etcd" "$dir/etcd"
fi

# The noop controller, rebuilt when its sources change.
src=$(cd "$here" && cat cmd/noop-controller/*.go | sha256sum | cut -c1-16)
if [[ -x $dir/noop-controller && $(cat "$dir/noop-controller.src" 2>/dev/null) == "$src" ]]; then
	echo "k8s-tools: noop-controller up to date"
else
	say "building noop-controller"
	(cd "$here" && nice -n "$nice_level" go build -trimpath -ldflags "-s -w" -o "$tmp/noop-controller" ./cmd/noop-controller)
	echo "$src" >"$tmp/noop-controller.src"
	mv -f "$tmp/noop-controller" "$dir/noop-controller"
	mv -f "$tmp/noop-controller.src" "$dir/noop-controller.src"
	say "built noop-controller"
fi
echo "k8s-tools: $dir"
