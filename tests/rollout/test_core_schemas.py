"""The core Kubernetes parts of every serving tree, checked against Kubernetes' own strict schemas
(kubernetes-validate, Kubernetes 1.31: image volumes exist there as alpha) — the independent
check of what trainops validates itself: Deployments and Services whole, and every pod
template (Rollout, LeaderWorkerSet leader and worker) as a v1 PodTemplate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from tests.render.test_core_schemas import KUBERNETES, _pod_templates, _strict
from tests.rollout.helpers import tree
from tests.rollout.test_golden import CASES


@pytest.mark.parametrize("case", sorted(CASES))
def test_core_objects_and_pod_templates_pass_kubernetes_schemas(case: str, tmp_path: Path) -> None:
    rendered = tree(tmp_path, CASES[case])
    checked = 0
    for obj in rendered.objects:
        if (obj["apiVersion"], obj["kind"]) in (("apps/v1", "Deployment"), ("v1", "Service")):
            _strict(obj)
            checked += 1
        for template in _pod_templates(obj.get("spec")):
            pod: dict[str, Any] = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"}}
            pod["template"] = template
            _strict(pod)
            checked += 1
    assert checked > 0


def test_a_wrong_field_is_caught_by_kubernetes_schemas() -> None:
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"}, "spec": {"portz": []}},
            KUBERNETES,
            strict=True,
        )
