// Command gatewayapi-plugin is an Argo Rollouts traffic-router plugin for Gateway API
// HTTPRoutes, written for trainops' simulated cluster.
//
// Why it exists: the Argo Rollouts Gateway API plugin (argoproj-labs) is not served by the Go
// module proxy this project builds from, so it cannot be built here. This plugin speaks the
// same RPC protocol (Argo Rollouts' go-plugin handshake, built against argo-rollouts v1.9.1)
// and reads the same configuration under trafficRouting.plugins["argoproj-labs/gatewayAPI"]:
//
//	httpRoute: NAME        the HTTPRoute whose weights the Rollout moves
//	namespace: NS          its namespace (default: the Rollout's)
//
// What it does on the HTTPRoute (read and written through the API server, no cache):
//   - SetWeight: on every rule whose backendRefs name both the stable and the canary
//     Service, the canary's weight becomes the desired weight and the stable's 100 minus it.
//   - SetHeaderRoute: a rule named after the managed route, matching the step's headers and
//     sending everything to the canary Service, is put first; with no match it is removed.
//   - RemoveManagedRoutes: every rule named after one of spec...managedRoutes is removed.
//   - VerifyWeight: reads the rule back and says whether the weights are the desired ones.
//
// Rules are identified by their `name` field (Gateway API v1.2+), so no side state is kept.
// Mirroring is not supported (an error says so).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/argoproj/argo-rollouts/rollout/trafficrouting/plugin/rpc"
	"github.com/argoproj/argo-rollouts/utils/plugin/types"
	goPlugin "github.com/hashicorp/go-plugin"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
)

const pluginName = "argoproj-labs/gatewayAPI"

var httpRoutes = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "httproutes"}

type config struct {
	HTTPRoute string `json:"httpRoute"`
	Namespace string `json:"namespace"`
}

type router struct {
	client dynamic.Interface
}

func rpcErr(err error) types.RpcError {
	if err == nil {
		return types.RpcError{}
	}
	return types.RpcError{ErrorString: err.Error()}
}

// InitPlugin builds the API client from the controller's environment (KUBECONFIG, else in-cluster).
func (r *router) InitPlugin() types.RpcError {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return rpcErr(fmt.Errorf("gatewayapi-plugin: no Kubernetes configuration: %w", err))
	}
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return rpcErr(err)
	}
	r.client = client
	return types.RpcError{}
}

func pluginConfig(ro *v1alpha1.Rollout) (config, error) {
	var cfg config
	canary := ro.Spec.Strategy.Canary
	if canary == nil || canary.TrafficRouting == nil {
		return cfg, fmt.Errorf("rollout %s/%s has no canary trafficRouting", ro.Namespace, ro.Name)
	}
	raw, ok := canary.TrafficRouting.Plugins[pluginName]
	if !ok {
		return cfg, fmt.Errorf("rollout %s/%s has no trafficRouting.plugins[%q]", ro.Namespace, ro.Name, pluginName)
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return cfg, fmt.Errorf("trafficRouting.plugins[%q] of %s/%s: %w", pluginName, ro.Namespace, ro.Name, err)
	}
	if cfg.HTTPRoute == "" {
		return cfg, fmt.Errorf("trafficRouting.plugins[%q] of %s/%s names no httpRoute", pluginName, ro.Namespace, ro.Name)
	}
	if cfg.Namespace == "" {
		cfg.Namespace = ro.Namespace
	}
	return cfg, nil
}

// edit reads the HTTPRoute, lets change rewrite its rules, and writes it back when they changed
// (an update on the read resourceVersion: a concurrent writer makes it fail and the controller retries).
func (r *router) edit(ro *v1alpha1.Rollout, change func(rules []any) ([]any, error)) error {
	cfg, err := pluginConfig(ro)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	routes := r.client.Resource(httpRoutes).Namespace(cfg.Namespace)
	route, err := routes.Get(ctx, cfg.HTTPRoute, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("HTTPRoute %s/%s: %w", cfg.Namespace, cfg.HTTPRoute, err)
	}
	rules, _, err := unstructured.NestedSlice(route.Object, "spec", "rules")
	if err != nil {
		return fmt.Errorf("HTTPRoute %s/%s: spec.rules: %w", cfg.Namespace, cfg.HTTPRoute, err)
	}
	before, _ := json.Marshal(rules)
	rules, err = change(rules)
	if err != nil {
		return fmt.Errorf("HTTPRoute %s/%s: %w", cfg.Namespace, cfg.HTTPRoute, err)
	}
	after, _ := json.Marshal(rules)
	if string(before) == string(after) {
		return nil
	}
	if err := unstructured.SetNestedSlice(route.Object, rules, "spec", "rules"); err != nil {
		return err
	}
	_, err = routes.Update(ctx, route, metav1.UpdateOptions{FieldManager: "argo-rollouts-gatewayapi"})
	if err != nil {
		return fmt.Errorf("HTTPRoute %s/%s: %w", cfg.Namespace, cfg.HTTPRoute, err)
	}
	return nil
}

func services(ro *v1alpha1.Rollout) (stable, canary string) {
	return ro.Spec.Strategy.Canary.StableService, ro.Spec.Strategy.Canary.CanaryService
}

// splitRules applies fn to each rule whose backendRefs name both Services; it fails when none does.
func splitRules(ro *v1alpha1.Rollout, rules []any, fn func(refs []any, stable, canary int)) error {
	stableName, canaryName := services(ro)
	found := false
	for _, rule := range rules {
		m, ok := rule.(map[string]any)
		if !ok {
			continue
		}
		refs, _ := m["backendRefs"].([]any)
		stable, canary := -1, -1
		for i, ref := range refs {
			rm, _ := ref.(map[string]any)
			switch rm["name"] {
			case stableName:
				stable = i
			case canaryName:
				canary = i
			}
		}
		if stable >= 0 && canary >= 0 {
			fn(refs, stable, canary)
			found = true
		}
	}
	if !found {
		return fmt.Errorf("no rule has both backendRefs %s and %s", stableName, canaryName)
	}
	return nil
}

func (r *router) UpdateHash(*v1alpha1.Rollout, string, string, []v1alpha1.WeightDestination) types.RpcError {
	return types.RpcError{}
}

func (r *router) SetWeight(ro *v1alpha1.Rollout, desired int32, extra []v1alpha1.WeightDestination) types.RpcError {
	if len(extra) > 0 {
		return rpcErr(fmt.Errorf("gatewayapi-plugin: additional weight destinations (experiments) are not supported"))
	}
	return rpcErr(r.edit(ro, func(rules []any) ([]any, error) {
		err := splitRules(ro, rules, func(refs []any, stable, canary int) {
			refs[stable].(map[string]any)["weight"] = int64(100 - desired)
			refs[canary].(map[string]any)["weight"] = int64(desired)
		})
		return rules, err
	}))
}

func (r *router) VerifyWeight(ro *v1alpha1.Rollout, desired int32, _ []v1alpha1.WeightDestination) (types.RpcVerified, types.RpcError) {
	verified := types.Verified
	err := r.edit(ro, func(rules []any) ([]any, error) {
		err := splitRules(ro, rules, func(refs []any, stable, canary int) {
			w, _ := refs[canary].(map[string]any)["weight"].(int64)
			if w != int64(desired) {
				verified = types.NotVerified
			}
		})
		return rules, err
	})
	if err != nil {
		return types.NotVerified, rpcErr(err)
	}
	return verified, types.RpcError{}
}

func headerRule(name, canary string, port any, match []v1alpha1.HeaderRoutingMatch) (map[string]any, error) {
	headers := []any{}
	for _, m := range match {
		if m.HeaderValue == nil {
			return nil, fmt.Errorf("header route %s: header %s has no value", name, m.HeaderName)
		}
		switch {
		case m.HeaderValue.Exact != "":
			headers = append(headers, map[string]any{"type": "Exact", "name": m.HeaderName, "value": m.HeaderValue.Exact})
		case m.HeaderValue.Regex != "":
			headers = append(headers, map[string]any{"type": "RegularExpression", "name": m.HeaderName, "value": m.HeaderValue.Regex})
		case m.HeaderValue.Prefix != "":
			headers = append(headers, map[string]any{"type": "RegularExpression", "name": m.HeaderName, "value": "^" + m.HeaderValue.Prefix + ".*"})
		default:
			return nil, fmt.Errorf("header route %s: header %s has an empty value", name, m.HeaderName)
		}
	}
	ref := map[string]any{"group": "", "kind": "Service", "name": canary, "weight": int64(1)}
	if port != nil {
		ref["port"] = port
	}
	return map[string]any{
		"name":        name,
		"matches":     []any{map[string]any{"headers": headers}},
		"backendRefs": []any{ref},
	}, nil
}

func withoutRules(rules []any, names map[string]bool) []any {
	kept := []any{}
	for _, rule := range rules {
		if m, ok := rule.(map[string]any); ok && names[fmt.Sprint(m["name"])] {
			continue
		}
		kept = append(kept, rule)
	}
	return kept
}

// canaryPort is the port of the canary Service's backendRef in the weighted rule, if any.
func canaryPort(ro *v1alpha1.Rollout, rules []any) any {
	var port any
	_ = splitRules(ro, rules, func(refs []any, _, canary int) { port = refs[canary].(map[string]any)["port"] })
	return port
}

func (r *router) SetHeaderRoute(ro *v1alpha1.Rollout, route *v1alpha1.SetHeaderRoute) types.RpcError {
	return rpcErr(r.edit(ro, func(rules []any) ([]any, error) {
		kept := withoutRules(rules, map[string]bool{route.Name: true})
		if len(route.Match) == 0 {
			return kept, nil
		}
		_, canary := services(ro)
		rule, err := headerRule(route.Name, canary, canaryPort(ro, rules), route.Match)
		if err != nil {
			return nil, err
		}
		return append([]any{rule}, kept...), nil
	}))
}

func (r *router) SetMirrorRoute(*v1alpha1.Rollout, *v1alpha1.SetMirrorRoute) types.RpcError {
	return rpcErr(fmt.Errorf("gatewayapi-plugin: setMirrorRoute is not supported"))
}

func (r *router) RemoveManagedRoutes(ro *v1alpha1.Rollout) types.RpcError {
	names := map[string]bool{}
	for _, managed := range ro.Spec.Strategy.Canary.TrafficRouting.ManagedRoutes {
		names[managed.Name] = true
	}
	if len(names) == 0 {
		return types.RpcError{}
	}
	return rpcErr(r.edit(ro, func(rules []any) ([]any, error) { return withoutRules(rules, names), nil }))
}

func (r *router) Type() string {
	return "GatewayAPI"
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "--version" {
		fmt.Println("trainops gatewayapi-plugin for argo-rollouts v1.9.1")
		return
	}
	goPlugin.Serve(&goPlugin.ServeConfig{
		HandshakeConfig: goPlugin.HandshakeConfig{
			ProtocolVersion:  1,
			MagicCookieKey:   "ARGO_ROLLOUTS_RPC_PLUGIN",
			MagicCookieValue: "trafficrouter",
		},
		Plugins: map[string]goPlugin.Plugin{
			"RpcTrafficRouterPlugin": &rpc.RpcTrafficRouterPlugin{Impl: &router{}},
		},
	})
}
