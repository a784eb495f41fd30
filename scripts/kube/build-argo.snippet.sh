# Argo CD: the multi-call `argocd` binary (ARGOCD_BINARY_NAME picks application-controller or
# repo-server). Upstream replaces github.com/argoproj/argo-cd/gitops-engine with its own
# ./gitops-engine directory, which no module release carries: the wrapper takes the engine
# from the proxy at ARGOCD_GITOPS_ENGINE, the served pseudo-version nearest the tag's tree.
build_argocd() {
    version="$ARGOCD_VERSION"; have argocd && return 0
    local dir="$cache/src/argocd"
    wrapper "$dir" github.com/argoproj/argo-cd/v3 "$version"
    (cd "$dir" && go mod edit \
        "-replace=github.com/argoproj/argo-cd/gitops-engine=github.com/argoproj/argo-cd/gitops-engine@$ARGOCD_GITOPS_ENGINE")
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
