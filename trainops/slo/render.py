"""The Kubernetes objects of spec.slo, rendered beside what they observe.

Serving tree (trainops.rollout.render), with spec.slo.serving and rollout.traffic argo-rollouts
or gateway-api:

    PrometheusRule <name>-slo            every serving SLO's rule group (trainops.slo.rules)
    ServiceMonitor <name>-slo            scrapes the engines through the stable and canary
                                         Services, so each series says which it came from
                                         (`service="<name>-stable"` / `"<name>-canary"`)
    ConfigMap <name>-slo-dashboard       the model's Grafana dashboard, for Grafana's sidecar
                                         (label grafana_dashboard: "1")

Disaggregated serving (rollout.disaggregation): the ServiceMonitor scrapes each track's pair
through its headless Service `<name>-<track>` (trainops.rollout.disagg), and also copies the
pod's pool (`llm-d.ai/role`) onto every series as `role`; each SLI reads its pool (TTFT the
prefill's, ITL and e2e the decode's, availability and goodput both: trainops.slo.rules).
KServe's LLMInferenceService makes its own pods and Services: its pairs have no track Service.

With traffic kserve the engines are scraped through rollout.metrics' ServiceMonitor alone and
the SLIs are per model (KServe has no stable and canary Services).

Training path (trainops.render.api.render_all), with spec.slo.training on a Kubernetes
scheduler: `slo/prometheusrule.yaml` (the pipeline's training SLOs, per run), and beside the run's
job `train/podmonitor.yaml` (the run's pods, port `metrics`) and `train/dashboard.yaml` (the run's
dashboard), which `train cancel` removes with the job.

Who serves the PodMonitor's port: the checkpoint sidecar of the run's pods (`trainops ckpt watch
--metrics-address 0.0.0.0:PORT`, PORT train.metricsAddress's), its container declaring the port
`metrics` (Prometheus' pod discovery lists init containers' ports, the native sidecar's too). It
is the one trainops process inside the pod — `train watch` runs on the user's side of the API
server, out of the cluster Prometheus' reach — and it sees what the series need but the
trainer's output: each checkpoint it pushes gives the step, the loss it records and the
checkpoint age; the step time is measured between checkpoints. Without train.metricsAddress
there is no port and no PodMonitor.
"""

from __future__ import annotations

import json
import re
from typing import Any

from trainops.manifest import Manifest
from trainops.manifest.common import duration_seconds
from trainops.manifest.disagg import LABEL_ROLE
from trainops.manifest.pipeline import PipelineSpec
from trainops.manifest.slo import SloSpec
from trainops.manifest.slo_catalog import Catalog, Slo, resolve
from trainops.slo.rules import (
    POOL_LABEL,
    RECORD,
    TRAIN_CKPT_AGE,
    TRAIN_ETTR,
    TRAIN_STEP,
    Selectors,
    rule_groups,
    serving_matchers,
    windows_of,
)

MONITORING = "monitoring.coreos.com/v1"
DASHBOARD_LABEL = "grafana_dashboard"
TRACKED = ("argo-rollouts", "gateway-api")  # traffic methods with stable and canary Services
METRICS_PORT = "metrics"


def pod_metrics_port(spec: PipelineSpec) -> int | None:
    """The port the run's pods serve their metrics on (the sidecar's), or None: no training SLOs
    on a Kubernetes scheduler, or no train.metricsAddress."""
    from trainops.slo.exporter import port_of  # lazy: loads ssl, socketserver

    train = spec.train
    if train is None or train.scheduler in ("local", "slurm") or spec.slo is None or spec.slo.training is None:
        return None
    return port_of(train.metrics_address) if train.metrics_address is not None else None


def service_regex(manifest: Manifest, name: str) -> str | None:
    """The Services whose series the serving SLIs count (None: every series of the model)."""
    rollout = manifest.pipeline.spec.rollout
    if rollout is None or rollout.traffic not in TRACKED:
        return None
    return f"{name}-stable|{name}-canary"


def track_matchers(manifest: Manifest, name: str, model: str, track: str) -> str:
    """The matchers of one track's series (the canary's, the stable's) of a model."""
    rollout = manifest.pipeline.spec.rollout
    if rollout is None or rollout.traffic not in TRACKED:
        return serving_matchers(model, service_regex=None)
    return f'model_name="{model}",service="{name}-{track}"'


def pooled(manifest: Manifest) -> bool:
    """Disaggregated serving: every series says its pool, and each SLI reads its own."""
    rollout = manifest.pipeline.spec.rollout
    return rollout is not None and rollout.disaggregation is not None


def serving_selectors(manifest: Manifest, catalog: Catalog, name: str) -> Selectors:
    models = sorted({s.model for s in catalog.serving() if s.model})
    regex = service_regex(manifest, name)
    matchers = {m: serving_matchers(m, service_regex=regex) for m in models}
    return Selectors(matchers, manifest.pipeline.metadata.name, pools=pooled(manifest))


def serving_rule_file_groups(manifest: Manifest, name: str) -> list[dict[str, Any]]:
    slo, rollout = manifest.pipeline.spec.slo, manifest.pipeline.spec.rollout
    if slo is None or rollout is None:
        return []
    catalog = resolve(manifest.pipeline)
    selectors = serving_selectors(manifest, catalog, name)
    return rule_groups(catalog, slo, engine=rollout.engine, selectors=selectors, subject="serving")


def training_matchers(manifest: Manifest) -> str:
    return f'pipeline="{manifest.pipeline.metadata.name}"'


def training_rule_file_groups(manifest: Manifest) -> list[dict[str, Any]]:
    slo = manifest.pipeline.spec.slo
    if slo is None or slo.training is None:
        return []
    catalog = resolve(manifest.pipeline)
    selectors = Selectors({}, manifest.pipeline.metadata.name)
    engine = manifest.pipeline.spec.rollout.engine if manifest.pipeline.spec.rollout else "vllm"
    return rule_groups(catalog, slo, engine=engine, selectors=selectors, subject="training",
                       training_matchers=training_matchers(manifest))  # fmt: skip


def prometheus_rule(metadata: dict[str, Any], groups: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": MONITORING, "kind": "PrometheusRule", "metadata": metadata, "spec": {"groups": groups}}


# -- dashboards --------------------------------------------------------------------------------


def _panel(title: str, exprs: list[tuple[str, str]], *, x: int, y: int, kind: str = "timeseries",
           unit: str = "percentunit", w: int = 12) -> dict[str, Any]:  # fmt: skip
    return {
        "type": kind,
        "title": title,
        "gridPos": {"x": x, "y": y, "w": w, "h": 8},
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [
            {"refId": chr(65 + i), "expr": expr, "legendFormat": legend} for i, (expr, legend) in enumerate(exprs)
        ],
    }


def _slo_panels(slo: Slo, spec: SloSpec, row: int, legend: str, *, extra: str = "") -> list[dict[str, Any]]:
    windows = windows_of(slo, duration_seconds(spec.scrape_interval))
    whole, short = windows[-1], windows[1]
    own = f'{{slo="{slo.name}"{extra}}}'
    budget = f"{slo.budget:g}"
    y = row * 8
    return [
        _panel(f"{slo.name}: SLI over {short} (objective {slo.objective:g}%)",
               [(f"1 - {RECORD}{short}{own}", legend)], x=0, y=y, w=8),
        _panel(f"{slo.name}: error budget left over {whole}",
               [(f"1 - {RECORD}{whole}{own} / {budget}", legend)], x=8, y=y, w=8, kind="stat"),
        _panel(f"{slo.name}: burn rate", [(f"{RECORD}{w}{own} / {budget}", f"{legend} {w}") for w in windows[:-1]],
               x=16, y=y, w=8, unit="none"),
    ]  # fmt: skip


def dashboard(uid: str, title: str, panels: list[dict[str, Any]], tags: list[str]) -> dict[str, Any]:
    return {
        "uid": uid[:40],
        "title": title,
        "tags": ["trainops", "slo", *tags],
        "schemaVersion": 39,
        "editable": False,
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "30s",
        "templating": {"list": [{"name": "datasource", "type": "datasource", "query": "prometheus"}]},
        "panels": [dict(p, id=i + 1) for i, p in enumerate(panels)],
    }


def model_dashboard(manifest: Manifest, model: str, catalog: Catalog, spec: SloSpec) -> dict[str, Any]:
    panels: list[dict[str, Any]] = []
    for row, slo in enumerate(catalog.serving(model)):
        panels += _slo_panels(slo, spec, row, "{{service}}")
    pipeline = manifest.pipeline.metadata.name
    return dashboard(f"trainops-{pipeline}-{model}", f"{model}: service levels ({pipeline})", panels, [model])


def run_dashboard(manifest: Manifest, run_id: str, catalog: Catalog, spec: SloSpec) -> dict[str, Any]:
    pipeline = manifest.pipeline.metadata.name
    run = f'pipeline="{pipeline}",run="{run_id}"'
    panels: list[dict[str, Any]] = []
    for row, slo in enumerate(catalog.training()):
        panels += _slo_panels(slo, spec, row, run_id, extra=f',run="{run_id}"')
    y = len(catalog.training()) * 8
    panels += [
        _panel("step time", [(f"{TRAIN_STEP}{{{run}}}", "step seconds")], x=0, y=y, w=8, unit="s"),
        _panel("ETTR so far", [(f"{TRAIN_ETTR}{{{run}}}", "ETTR")], x=8, y=y, w=8),
        _panel("seconds since the last complete checkpoint", [(f"{TRAIN_CKPT_AGE}{{{run}}}", "age")], x=16, y=y,
               w=8, unit="s"),
        _panel("loss", [(f"trainops_train_loss{{{run}}}", "loss")], x=0, y=y + 8, w=8, unit="none"),
        _panel("tokens/s", [(f"trainops_train_tokens_per_second{{{run}}}", "tokens/s")], x=8, y=y + 8, w=8,
               unit="none"),
        _panel("restarts", [(f"trainops_train_restarts_total{{{run}}}", "restarts")], x=16, y=y + 8, w=8,
               unit="none"),
    ]  # fmt: skip
    return dashboard(f"trainops-{pipeline}-{run_id}", f"{pipeline} run {run_id}: service levels", panels, [run_id])


def dashboard_config_map(metadata: dict[str, Any], key: str, board: dict[str, Any]) -> dict[str, Any]:
    labels = {**metadata.get("labels", {}), DASHBOARD_LABEL: "1"}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {**metadata, "labels": labels},
        "data": {key: json.dumps(board, indent=2, sort_keys=True) + "\n"},
    }


# -- the two trees ---------------------------------------------------------------------------------


def _endpoint(manifest: Manifest, slo: SloSpec) -> dict[str, Any]:
    endpoint: dict[str, Any] = {"port": "http", "path": "/metrics", "interval": slo.scrape_interval}
    if pooled(manifest):
        source = "__meta_kubernetes_pod_label_" + re.sub(r"[^a-zA-Z0-9_]", "_", LABEL_ROLE)
        endpoint["relabelings"] = [{"sourceLabels": [source], "targetLabel": POOL_LABEL, "action": "replace"}]
    return endpoint


def serving_objects(manifest: Manifest, *, name: str, metadata: Any, labels: dict[str, str]) -> list[dict[str, Any]]:
    """PrometheusRule, ServiceMonitor (tracked traffic only) and one dashboard ConfigMap per model.
    `metadata(name)` is the serving tree's ObjectMeta for a name."""
    slo = manifest.pipeline.spec.slo
    if slo is None or not slo.serving:
        return []
    catalog = resolve(manifest.pipeline)
    objects = [prometheus_rule(metadata(f"{name}-slo"), serving_rule_file_groups(manifest, name))]
    if service_regex(manifest, name) is not None:
        objects.append({
            "apiVersion": MONITORING,
            "kind": "ServiceMonitor",
            "metadata": metadata(f"{name}-slo"),
            "spec": {
                "selector": {
                    "matchLabels": {k: labels[k] for k in ("app.kubernetes.io/name", "app.kubernetes.io/component")},
                    "matchExpressions": [{"key": "trainops.dev/track", "operator": "In",
                                          "values": ["stable", "canary"]}],
                },
                "endpoints": [_endpoint(manifest, slo)],
            },
        })  # fmt: skip
    for model in sorted({s.model for s in catalog.serving() if s.model}):
        board = model_dashboard(manifest, model, catalog, slo)
        objects.append(dashboard_config_map(metadata(f"{name}-{model}-slo-dashboard"[:253]), f"{model}-slo.json",
                                            board))  # fmt: skip
    return objects


def training_objects(
    manifest: Manifest, *, run_id: str, metadata: Any, selector: dict[str, str]
) -> list[dict[str, Any]]:
    """PrometheusRule (the pipeline's training SLOs), PodMonitor (the run's pods) and the run's dashboard."""
    slo = manifest.pipeline.spec.slo
    if slo is None or slo.training is None:
        return []
    catalog = resolve(manifest.pipeline)
    pipeline = manifest.pipeline.metadata.name
    monitor = {
        "apiVersion": MONITORING,
        "kind": "PodMonitor",
        "metadata": metadata(f"{pipeline}-{run_id}-train"),
        "spec": {
            "selector": {"matchLabels": selector},
            "podMetricsEndpoints": [{"port": METRICS_PORT, "path": "/metrics", "interval": slo.scrape_interval}],
        },
    }
    monitors = [monitor] if pod_metrics_port(manifest.pipeline.spec) is not None else []
    return [
        prometheus_rule(metadata(f"{pipeline}-train-slo"), training_rule_file_groups(manifest)),
        *monitors,
        dashboard_config_map(metadata(f"{pipeline}-{run_id}-dashboard"), f"{pipeline}-{run_id}.json",
                             run_dashboard(manifest, run_id, catalog, slo)),
    ]  # fmt: skip
