"""Disaggregated serving (rollout.disaggregation): the manifest's checks at their line, the pair
rendered for vLLM and SGLang (DisaggregatedSet or LeaderWorkerSets, InferencePool, endpoint picker,
HTTPRoute), strict-valid against the vendored CRDs, and a release always a pair."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.rollout.helpers import CANARY, STABLE, V1, V2, rollout, tree
from tests.rollout.test_golden import assert_golden
from trainops.errors import ManifestError
from trainops.manifest import load_manifest
from trainops.rollout.disagg import LABEL_REVISION, LABEL_ROLE, revision
from trainops.rollout.render import check_tree
from trainops_testing.projects import write_variant

GATEWAY = {"gateway": {"name": "inference", "namespace": "gateway"}}
EPP = {"image": "ghcr.io/llm-d/llm-d-inference-scheduler:v0.4.0"}
TOPOLOGY = {
    "cluster": {
        "topology": {
            "name": "gpu-fabric",
            "nodeLabels": {"node.trainops.dev/pool": "gpu"},
            "tiers": [
                {"name": "rack", "nodeLabel": "topology.trainops.dev/rack"},
                {"name": "spine", "nodeLabel": "topology.trainops.dev/spine"},
            ],
            "domains": {"spine-0": {"rack-0": {}, "rack-1": {}}},
        }
    }
}


def disagg(engine: str = "vllm", **fields: Any) -> dict[str, Any]:
    connector = "NixlConnector" if engine == "vllm" else "mooncake"
    spec = {
        "connector": connector,
        "prefill": {"replicas": 1, "gpusPerReplica": 2, "tensorParallel": 2},
        "decode": {"replicas": 2, "gpusPerReplica": 1},
        "ratio": "1:2",
        "slices": 2,
        "endpointPicker": EPP,
        **fields,
    }
    return {"engine": engine, "traffic": "gateway-api", **GATEWAY, "disaggregation": spec}


def overlay(engine: str = "vllm", spec: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    data = rollout(disagg(engine, **fields))
    data["spec"].update(spec or {})
    return data


CASES = {
    # DisaggregatedSet slices pinned to a rack each, A/B by header, vLLM with NIXL
    "vllm-disaggregated-set": overlay(spec=TOPOLOGY, placement="rack"),
    # SGLang's prefill spans two nodes (an LWS group of 2), plain LeaderWorkerSets
    "sglang-disaggregated-lws": overlay(
        "sglang",
        workload="leader-worker-sets",
        prefill={"replicas": 1, "gpusPerReplica": 16, "tensorParallel": 16},
        slices=1,
    ),
    # KServe makes each release's workloads, pool and picker; trainops' HTTPRoute weights the pools
    "vllm-disaggregated-kserve": overlay(workload="llm-inference-service", endpointPicker=None),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_tree_matches_golden_and_validates(case: str, tmp_path: Path) -> None:
    assert_golden(case, tree(tmp_path, CASES[case]))


def _objects(rendered: Any, kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in rendered.objects if o["kind"] == kind}


def test_each_release_is_one_revision_on_both_roles_and_its_pool(tmp_path: Path) -> None:
    rendered = tree(tmp_path, CASES["vllm-disaggregated-set"])
    sets = _objects(rendered, "DisaggregatedSet")
    pools = _objects(rendered, "InferencePool")
    for track, served in (("stable", V1), ("canary", V2)):
        roles = sets[f"tiny-llm-{track}"]["spec"]["roles"]
        assert [r["name"] for r in roles] == ["prefill", "decode"]
        for role in roles:
            labels = role["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["labels"]
            assert labels[LABEL_REVISION] == revision(served) and labels[LABEL_ROLE] == role["name"]
        assert pools[f"tiny-llm-{track}"]["spec"]["selector"]["matchLabels"][LABEL_REVISION] == revision(served)
    assert revision(V1) != revision(V2)
    placement = sets["tiny-llm-stable"]["spec"]["placementPolicy"]
    assert placement == {"type": "ExclusiveTopology", "topology": "topology.trainops.dev/rack"}
    (route,) = _objects(rendered, "HTTPRoute").values()
    weights = {b["name"]: b["weight"] for b in route["spec"]["rules"][-1]["backendRefs"]}
    assert weights == {"tiny-llm-stable": 90, "tiny-llm-canary": 10}
    assert all(b["kind"] == "InferencePool" for rule in route["spec"]["rules"] for b in rule["backendRefs"])


def test_stable_alone_routes_all_to_its_pool(tmp_path: Path) -> None:
    rendered = tree(tmp_path, CASES["vllm-disaggregated-set"], STABLE)
    assert check_tree(rendered) == []
    assert set(_objects(rendered, "InferencePool")) == {"tiny-llm-stable"}
    (route,) = _objects(rendered, "HTTPRoute").values()
    assert route["spec"]["rules"] == [
        {
            "backendRefs": [
                {
                    "group": "inference.networking.k8s.io",
                    "kind": "InferencePool",
                    "name": "tiny-llm-stable",
                    "weight": 100,
                }
            ]
        }
    ]


def test_engine_flags_carry_the_role_and_the_connector(tmp_path: Path) -> None:
    vllm = _objects(tree(tmp_path / "v", CASES["vllm-disaggregated-set"]), "DisaggregatedSet")["tiny-llm-stable"]
    command = vllm["spec"]["roles"][0]["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0][
        "command"
    ]
    assert command[command.index("--kv-transfer-config") + 1] == '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
    assert command[command.index("--tensor-parallel-size") + 1] == "2"
    sglang = _objects(tree(tmp_path / "s", CASES["sglang-disaggregated-lws"]), "LeaderWorkerSet")
    prefill = sglang["tiny-llm-stable-prefill"]["spec"]
    assert prefill["leaderWorkerTemplate"]["size"] == 2
    leader = prefill["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]["command"]
    assert leader[leader.index("--disaggregation-mode") + 1] == "prefill"
    assert leader[leader.index("--disaggregation-transfer-backend") + 1] == "mooncake"
    assert sglang["tiny-llm-stable-decode"]["spec"]["replicas"] == 2


def _problem(tmp_path: Path, data: dict[str, Any]) -> tuple[str, Path]:
    path = write_variant(tmp_path, data)
    with pytest.raises(ManifestError) as err:
        load_manifest(path)
    (problem,) = err.value.problems
    return str(problem), path


def _line(path: Path, text: str, after: str = "disaggregation:") -> int:
    rows = path.read_text(encoding="utf-8").splitlines()
    start = next(i for i, row in enumerate(rows) if row.strip() == after)
    return next(i for i, row in enumerate(rows[start:], start + 1) if row.strip().startswith(text))


@pytest.mark.parametrize(
    ("fields", "key", "expected"),
    [
        ({"decode": {"replicas": 0}}, "replicas", "should be greater than or equal to 1"),
        ({"ratio": "1:3"}, "ratio", "ratio 1:3 does not divide the replicas (prefill 1, decode 2)"),
        ({"connector": "mooncake"}, "connector", "vllm has no connector mooncake (mooncake is sglang's)"),
        ({"connector": "Nixl"}, "connector", "use one of NixlConnector, LMCacheConnectorV1"),
        ({"placement": "rack"}, "placement", "placement rack is no tier of cluster.topology"),
        ({"decode": {"replicas": 2, "gpusPerReplica": 2}}, "decode", "tensorParallel × dataParallel (1×1)"),
    ],
)
def test_bad_input_is_one_line_at_its_field(tmp_path: Path, fields: dict[str, Any], key: str, expected: str) -> None:
    text, path = _problem(tmp_path, overlay(**fields))
    assert "\n" not in text and expected in text, text
    after = "decode:" if key == "replicas" else "disaggregation:"
    assert f":{_line(path, key + ':', after)}:" in text, text


def test_sglang_refuses_a_vllm_connector_and_the_traffic_must_be_gateway_api(tmp_path: Path) -> None:
    text, _ = _problem(tmp_path / "a", overlay("sglang", connector="NixlConnector"))
    assert "sglang has no connector NixlConnector (NixlConnector is vllm's): use one of mooncake, nixl" in text
    data = overlay()
    data["spec"]["rollout"]["traffic"] = "kserve"
    data["spec"]["rollout"]["abTest"] = None
    text, _ = _problem(tmp_path / "b", data)
    assert "disaggregation is routed by InferencePools on the Gateway API, not kserve" in text
    assert "spec.rollout.traffic" in text


def test_a_pool_selector_reaching_the_other_release_is_refused_at_the_patch(tmp_path: Path) -> None:
    """A patch that widens the stable pool's selector to every serving pod reaches the canary's
    prefill and decode too: nothing renders, one line at the patch."""
    widen = {"spec": {"selector": {"matchLabels": {"trainops.dev/track": None, LABEL_REVISION: None}}}}
    data = overlay()
    data["spec"]["patches"] = [{"target": {"kind": "InferencePool", "name": "tiny-llm-stable"}, "merge": widen}]
    with pytest.raises(ManifestError) as err:
        tree(tmp_path, data, CANARY)
    text = str(err.value)
    assert "\n" not in text
    assert "spec.patches[0]: InferencePool tiny-llm-stable reaches pods of 2 revisions" in text
    assert tree(tmp_path / "stable", data, STABLE).objects  # with one release served there is no other to reach


# -- the canary walks across two pools, one commit a step ------------------------------------------


def _route_weights(project: Any) -> dict[str, int]:
    from tests.gitops.helpers import git

    text = git("--git-dir", str(project.gitops), "show", "main:clusters/dev-serve/httproute.yaml")
    (route,) = [d for d in yaml.safe_load_all(text) if d]
    return {b["name"]: b["weight"] for b in route["spec"]["rules"][-1]["backendRefs"]}


def _pools(project: Any) -> dict[str, str]:
    """pool name → the revision its selector names, as committed."""
    from tests.gitops.helpers import git

    text = git("--git-dir", str(project.gitops), "show", "main:clusters/dev-serve/inferencepool.yaml")
    return {
        d["metadata"]["name"]: d["spec"]["selector"]["matchLabels"][LABEL_REVISION]
        for d in yaml.safe_load_all(text)
        if d
    }


def test_a_canary_walks_the_route_from_the_stable_pool_to_the_canary_pool(tmp_path: Path) -> None:
    from tests.rollout.test_flows import rollout as act
    from trainops_testing.projects import IMAGE, make_project

    project = make_project(tmp_path / "p", overlay(spec=TOPOLOGY, placement="rack"))
    act(project, "start", "tiny-llm/model:v1", "--image", IMAGE)
    assert _route_weights(project) == {"tiny-llm-stable": 100}
    (v1,) = _pools(project).values()
    act(project, "start", "tiny-llm/model:v2", "--image", IMAGE)
    assert _route_weights(project) == {"tiny-llm-stable": 90, "tiny-llm-canary": 10}
    pools = _pools(project)
    assert pools["tiny-llm-stable"] == v1 and pools["tiny-llm-canary"] != v1
    v2 = pools["tiny-llm-canary"]
    assert act(project, "promote")["weight"] == 50
    assert _route_weights(project) == {"tiny-llm-stable": 50, "tiny-llm-canary": 50}
    assert act(project, "promote")["weight"] == 100
    assert _route_weights(project) == {"tiny-llm-stable": 0, "tiny-llm-canary": 100}
    act(project, "promote")  # v2 is stable: its pair is the stable pool, the canary's is gone
    assert _route_weights(project) == {"tiny-llm-stable": 100} and _pools(project) == {"tiny-llm-stable": v2}
    act(project, "start", "tiny-llm/model:v3", "--image", IMAGE)
    act(project, "abort")
    assert _route_weights(project) == {"tiny-llm-stable": 100} and _pools(project) == {"tiny-llm-stable": v2}
    act(project, "rollback")
    assert _pools(project) == {"tiny-llm-stable": v1}


def test_a_split_pair_commits_nothing(tmp_path: Path) -> None:
    from tests.gitops.helpers import tip
    from tests.rollout.test_flows import rollout as act
    from trainops_testing.cli import run
    from trainops_testing.projects import IMAGE, make_project

    widen = {"spec": {"selector": {"matchLabels": {"trainops.dev/track": None, LABEL_REVISION: None}}}}
    data = overlay()
    data["spec"]["patches"] = [{"target": {"kind": "InferencePool", "name": "tiny-llm-stable"}, "merge": widen}]
    project = make_project(tmp_path / "p", data)
    act(project, "start", "tiny-llm/model:v1", "--image", IMAGE)  # one release: nothing else to reach
    before = tip(project.gitops)
    outcome = run("rollout", *project.cli("start", "tiny-llm/model:v2", "--image", IMAGE))
    assert outcome.code != 0
    (line,) = outcome.stderr.strip().splitlines()
    assert "spec.patches[0]: InferencePool tiny-llm-stable reaches pods of 2 revisions" in line
    assert tip(project.gitops) == before


def test_the_pickers_access_is_checked_strictly(tmp_path: Path) -> None:
    rendered = tree(tmp_path, CASES["vllm-disaggregated-set"])
    binding = next(o for o in rendered.objects if o["kind"] == "RoleBinding")
    binding["roleRef"]["kind"] = "Clusterrole"
    role = next(o for o in rendered.objects if o["kind"] == "Role")
    role["rules"][0]["verb"] = ["get"]
    problems = [str(p) for p in check_tree(rendered)]
    assert any("RoleBinding/tiny-llm-stable-epp: roleRef.kind" in p for p in problems), problems
    assert any("Role/tiny-llm-stable-epp: rules[0].verb: unknown field" in p for p in problems), problems


def test_kserve_llm_inference_services_are_one_per_release_and_the_route_weights_their_pools(tmp_path: Path) -> None:
    """With workload llm-inference-service KServe makes each release's prefill and decode, pool and
    picker; a release's service is named by its revision, so a promote renames no object and
    updates none in place: v2's service as the canary is the very spec it has as stable."""
    from tests.gitops.helpers import git
    from tests.rollout.test_flows import rollout as act
    from trainops.manifest import load_manifest
    from trainops.rollout.lineage import pool_history
    from trainops_testing.projects import IMAGE, make_project

    project = make_project(tmp_path / "p", overlay(workload="llm-inference-service", endpointPicker=None))

    def services() -> dict[str, dict[str, Any]]:
        text = git("--git-dir", str(project.gitops), "show", "main:clusters/dev-serve/llminferenceservice.yaml")
        return {d["metadata"]["name"]: d for d in yaml.safe_load_all(text) if d}

    act(project, "start", "tiny-llm/model:v1", "--image", IMAGE)
    (v1,) = services()
    act(project, "start", "tiny-llm/model:v2", "--image", IMAGE)
    canary = services()
    (v2,) = set(canary) - {v1}
    assert _route_weights(project) == {f"{v1}-inference-pool": 90, f"{v2}-inference-pool": 10}
    act(project, "promote", "--full")
    after = services()
    assert set(after) == {v2} and after[v2]["spec"] == canary[v2]["spec"]
    assert after[v2]["metadata"]["labels"]["trainops.dev/track"] == "stable"
    assert _route_weights(project) == {f"{v2}-inference-pool": 100}
    manifest = load_manifest(project.manifest)
    digest = after[v2]["spec"]["model"]["uri"].rsplit("@", 1)[1]
    history = [(p.pool, p.weight) for p in pool_history(manifest, digest)]
    assert history == [(f"{v2}-inference-pool", 10), (f"{v2}-inference-pool", 100)]


def test_kserve_needs_vllm_and_the_others_need_a_picker(tmp_path: Path) -> None:
    text, _ = _problem(tmp_path / "a", overlay("sglang", workload="llm-inference-service", endpointPicker=None))
    assert "spec.rollout.disaggregation.workload: KServe's LLMInferenceService presets run vLLM" in text
    text, _ = _problem(tmp_path / "b", overlay(endpointPicker=None))
    assert "spec.rollout.disaggregation: missing required field 'endpointPicker'" in text


def test_a_role_relabelled_to_another_revision_is_refused(tmp_path: Path) -> None:
    """A patch giving the decode LeaderWorkerSet's pods another release's revision leaves the pool
    with prefill pods only: nothing renders, one line at the patch."""
    relabel = {
        "spec": {"leaderWorkerTemplate": {"workerTemplate": {"metadata": {"labels": {LABEL_REVISION: "other"}}}}}
    }
    data = overlay("sglang", workload="leader-worker-sets", slices=1)
    data["spec"]["patches"] = [
        {"target": {"kind": "LeaderWorkerSet", "name": "tiny-llm-stable-decode"}, "merge": relabel}
    ]
    with pytest.raises(ManifestError) as err:
        tree(tmp_path, data, STABLE)
    text = str(err.value)
    assert "\n" not in text
    assert "spec.patches[0]: InferencePool tiny-llm-stable reaches no decode pods" in text
