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
