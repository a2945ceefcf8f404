#!/usr/bin/env bash
# k8s-bin.sh builds the pinned Kubernetes control-plane binaries, kubectl and etcd into a
# git-ignored cache folder keyed by version, and prints that folder on stdout (it is what
# KUBEBUILDER_ASSETS and the lab use).
#
# Each binary is built into a scratch folder and renamed into place only once its build has
# finished, and the folder's .complete marker is written only when every binary is there, so an
# interrupted build is never mistaken for a finished one; a later run builds only what is missing.
set -euo pipefail

K8S_VERSION=v1.37.2
ETCD_VERSION=v3.6.16
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${FEDBR_BIN_CACHE:-$ROOT/.cache/k8s-bin}"
DIR="$CACHE/k8s-$K8S_VERSION-etcd-$ETCD_VERSION-$(go env GOOS)-$(go env GOARCH)"

# binary name, tools module, package
BINARIES=(
	"etcd etcd go.etcd.io/etcd/server/v3"
	"kube-apiserver k8s k8s.io/kubernetes/cmd/kube-apiserver"
	"kube-controller-manager k8s k8s.io/kubernetes/cmd/kube-controller-manager"
	"kube-scheduler k8s k8s.io/kubernetes/cmd/kube-scheduler"
	"kubectl k8s k8s.io/kubernetes/cmd/kubectl"
)

log() { echo "k8s-bin: $*" >&2; }

complete() {
	[[ -f "$DIR/.complete" ]] || return 1
	local b
	for b in "${BINARIES[@]}"; do
		set -- $b
		[[ -x "$DIR/$1" ]] || return 1
	done
}

if complete; then
	log "present: $DIR (no rebuild)"
	echo "$DIR"
	exit 0
fi

mkdir -p "$DIR"
rm -f "$DIR/.complete"
TMP="$(mktemp -d "$CACHE/.build.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT

for b in "${BINARIES[@]}"; do
	set -- $b
	if [[ -x "$DIR/$1" ]]; then
		log "present: $1"
		continue
	fi
	start=$SECONDS
	log "building $1 from $3 (cold builds take minutes on 2 cores)"
	(cd "$ROOT/hack/tools/$2" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$TMP/$1" "$3")
	mv "$TMP/$1" "$DIR/$1"
	log "built $1 in $((SECONDS - start))s"
done

printf 'kubernetes %s\netcd %s\n' "$K8S_VERSION" "$ETCD_VERSION" >"$DIR/VERSIONS"
touch "$DIR/.complete"
log "ready: $DIR"
echo "$DIR"
