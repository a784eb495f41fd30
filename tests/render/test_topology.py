"""spec.cluster.topology: declared once, checked where it is written (validate), and the
Kueue level a train.topology.highestTierAllowed names (the files themselves: test_golden)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.render.helpers import render, variant
from trainops.errors import ManifestError
from trainops_testing.cli import run
from trainops_testing.projects import merge

FABRIC: dict[str, Any] = {
    "name": "gpu-fabric",
    "nodeLabels": {"node.trainops.dev/pool": "gpu"},
    "tiers": [
        {"name": "rack", "nodeLabel": "topology.trainops.dev/rack"},
        {"name": "spine", "nodeLabel": "topology.trainops.dev/spine"},
    ],
    "domains": {"spine-0": {"rack-0": {}, "rack-1": {}}},
}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"train": {"topology": {"highestTierAllowed": 3}}}, "highestTierAllowed 3 is not a tier of cluster.topology"),
        ({"train": {"topology": {"level": "example.com/row"}}}, "level example.com/row is not a node label"),
        ({"cluster": {"topology": {"domains": {"rack-9": {}}}}}, "every branch must be as deep as the tiers"),
        (
            {"cluster": {"topology": {"tiers": [*FABRIC["tiers"], {"name": "zone", "nodeLabel": "zone"}]}}},
            "domains are 2 deep but there are 3 tiers",
        ),
        ({"cluster": {"topology": {"domains": {"spine-0": {"spine-0": {}}}}}}, "spine-0 named twice"),
        ({"cluster": {"topology": {"domains": {"Spine_0": {"r": {}}}}}}, "'Spine_0' must be a DNS-1123 label"),
        (
            {
                "cluster": {
                    "topology": {"tiers": [{"name": "rack", "nodeLabel": "a/b"}, {"name": "rack", "nodeLabel": "c"}]}
                }
            },
            "each tier needs its own name and node label",
        ),
    ],
)
def test_a_topology_that_cannot_work_is_a_manifest_problem(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    overlay = merge({"spec": {"cluster": {"topology": FABRIC}}}, {"spec": change})
    with pytest.raises(ManifestError) as err:
        variant(tmp_path, overlay)
    assert message in str(err.value)
    out = run("validate", "-f", str(tmp_path / "trainops.yaml"))
    assert out.code == 3 and message in out.stderr


def test_kueue_takes_the_label_of_the_highest_tier_allowed(tmp_path: Path) -> None:
    overlay = {
        "spec": {
            "cluster": {"topology": FABRIC},
            "train": {"scheduler": "kueue", "topology": {"highestTierAllowed": 2}},
            "patches": None,
        }
    }
    objects = render(variant(tmp_path, overlay)).objects
    jobset = next(o for o in objects if o["kind"] == "JobSet")
    annotations = [
        job["template"]["spec"]["template"]["metadata"]["annotations"] for job in jobset["spec"]["replicatedJobs"]
    ]
    assert {a["kueue.x-k8s.io/podset-required-topology"] for a in annotations} == {"topology.trainops.dev/spine"}
    flavors = [o["metadata"]["name"] for o in objects if o["kind"] == "ResourceFlavor"]
    assert flavors == ["gpu-fabric"]  # no default-flavor beside the topology's
    queue = next(o for o in objects if o["kind"] == "ClusterQueue")
    assert queue["spec"]["resourceGroups"][0]["flavors"][0]["name"] == "gpu-fabric"


def test_volcano_without_domains_renders_no_hypernodes_and_says_why(tmp_path: Path) -> None:
    fabric = {k: v for k, v in FABRIC.items() if k != "domains"}
    result = render(variant(tmp_path, {"spec": {"cluster": {"topology": fabric}}}))
    assert not [o for o in result.objects if o["kind"] == "HyperNode"]
    assert any("Volcano needs them as HyperNodes" in w for w in result.warnings)
