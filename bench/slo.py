"""Service levels end to end: how long a latency regression takes to page and to abort the canary,
and what the SLO rules cost Prometheus.

On loopback, real parts: two vLLM stand-ins (trainops_testing/engine_metrics.py: vLLM's metric names and
bucket edges; stable and canary), Debian's Prometheus scraping them every second and evaluating
the rules trainops renders for the manifest's SLOs (every second), prometheus-alertmanager
(group_wait 0) delivering to `trainops alerts serve`, and a GitOps repository with v1 stable
and v2 as canary. The SLOs' window is 1h, so the page's 1h/5m windows scale to 5s and 4s (four
scrapes): what a 30-day SLO does in minutes happens here in seconds, by the same rules.

1. **regression → page firing**: from the canary's TTFT going over the threshold (every request
   2.5 s, threshold 1 s) to Prometheus' ALERTS{alertname="SLOBurnRatePage"} firing.
2. **→ incident**: to the receiver's incident of the canary's release in the registry.
3. **→ abort commit**: to `rollout promote --auto`'s abort commit (it judges the step over its
   3 s pause first).
4. **rules' cost**: the series the SLO rules record per model, and the rule groups' evaluation
   time per model (prometheus_rule_group_last_duration_seconds, summed over the model's groups;
   the median of 10 evaluations).

The window math: every scrape brings 50 requests. With every canary request bad, the first bad
scrape is about a fifth of the requests in the 5 s window (burn rate about 20, over 14.4) and a
quarter of those in the 4 s one, so the page fires at the first rule evaluation after the
first bad scrape: at most one scrape interval plus one evaluation interval after the
regression (2 s here). For a 30-day SLO the same math gives minutes: with every request bad,
the 1 h window's error ratio crosses 14.4 × budget after 14.4 × budget of the hour — 52 s at
a 99.9% objective, 8.6 min at 99% — plus a scrape and an evaluation (30 s each by default).

    python bench/slo.py            # 5 regressions
    python bench/slo.py --quick    # 1, the rules' evaluation time read twice, not 10 times (CI)
    python bench/slo.py --doc      # also write docs/operations/results/slo.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

from harness import docresult  # noqa: E402

from trainops_testing.engine_metrics import VllmStandIn  # noqa: E402
from trainops_testing.projects import IMAGE, make_project, slo_overlay  # noqa: E402
from trainops_testing.prometheus import Alertmanager, Prometheus  # noqa: E402
from trainops_testing.services import LOOPBACK, free_port, git_env  # noqa: E402

TOKEN = "bench-token"
TIMEOUT = 120.0
PAGE = 'ALERTS{alertname="SLOBurnRatePage",slo="tiny-llm-ttft",service="tiny-llm-canary",alertstate="firing"}'


@dataclass
class Result:
    trials: int
    to_page_s: list[float]
    to_incident_s: list[float]
    to_abort_commit_s: list[float]
    median_page_s: float
    median_incident_s: float
    median_abort_s: float
    recorded_series_per_model: int
    rule_groups_per_model: int
    rules_per_model: int
    rule_eval_ms_per_model: float
    load_before: float
    load_after: float


def _wait(probe: Callable[[], Any], what: str, *, pace: float = 0.05) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < TIMEOUT:
        try:
            if probe():
                return time.monotonic() - t0
        except Exception:  # a service still starting: not yet
            pass
        time.sleep(pace)  # pacing between probes
    raise SystemExit(f"slo bench: timed out waiting for {what}")


def _trainops(project: Any, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "trainops.cli.main", *project.cli(*args)], capture_output=True,
                          text=True, check=False)  # fmt: skip
    if check and done.returncode != 0:
        raise SystemExit(f"slo bench: trainops {' '.join(args)}: {done.stderr.strip()}")
    return done


def _one(root: Path, *, readings: int) -> tuple[float, float, float, list[Any]]:
    from trainops.faults.query import list_incidents
    from trainops.manifest import load_manifest
    from trainops.rollout.render import rule_file_of
    from trainops.ui.alert_receiver import Receiver

    stable, canary = VllmStandIn(), VllmStandIn()
    port = free_port()
    project = make_project(root / "p", slo_overlay(f"http://{LOOPBACK}:{port}"))
    for release in ("tiny-llm/model:v1", "tiny-llm/model:v2"):
        _trainops(project, "rollout", "start", release, "--image", IMAGE)
    manifest = load_manifest(project.manifest)
    receiver = Receiver(manifest, host=LOOPBACK, port=0, token=TOKEN).start()
    alertmanager = Alertmanager(root / "am", webhook=receiver.url, token=TOKEN)
    targets = {"tiny-llm-stable": [stable.target], "tiny-llm-canary": [canary.target]}
    prometheus = Prometheus(root / "prom", targets=targets, rules=rule_file_of(manifest), alertmanager=None,
                                port=port)  # fmt: skip
    stop = [stable.close, canary.close, receiver.close, alertmanager.stop, prometheus.stop]
    try:
        alertmanager.start()
        prometheus.alertmanager = f"{LOOPBACK}:{alertmanager.port}"
        prometheus.start()
        ratio = 'slo:sli_error:ratio_rate5s{slo="tiny-llm-ttft",service="tiny-llm-canary"}'
        _wait(lambda: prometheus.query(ratio), "the canary's SLI recorded")
        time.sleep(6)  # healthy history over the page's 5 s window: the regression starts from good
        assert not prometheus.query(PAGE), "a page before the regression"
        t0 = time.monotonic()
        canary.ttft = 2.5
        page = _wait(lambda: prometheus.query(PAGE), "the page firing")
        _wait(lambda: any(i.slo == "tiny-llm-ttft" and i.action == "page"
                          for i in list_incidents(load_manifest(project.manifest)).incidents),
              "the incident", pace=0.1)  # fmt: skip
        incident = time.monotonic() - t0
        aborted = _trainops(project, "rollout", "promote", "--auto", check=False)
        abort = time.monotonic() - t0
        if aborted.returncode != 8 or "aborted in commit" not in aborted.stderr:
            raise SystemExit(f"slo bench: promote --auto did not abort: {aborted.stderr.strip()}")
        groups = _rule_stats(prometheus, readings)
        return page, incident, abort, groups
    finally:
        for close in stop:
            close()


def _own_metric(text: str, name: str) -> dict[str, float]:
    """rule_group → value of one of Prometheus' own series on its /metrics (it does not scrape itself here)."""
    out = {}
    for line in text.splitlines():
        if line.startswith(name + "{") and "slo-tiny-llm" in line:
            group = line.split('rule_group="', 1)[1].split('"', 1)[0]
            out[group] = float(line.rsplit(" ", 1)[1])
    return out


def _rule_stats(prometheus: Prometheus, readings: int) -> list[Any]:
    """The model's rule groups: their rules and last evaluation time (median of `readings`
    readings, one evaluation apart), and the series the rules record."""
    import requests

    durations: dict[str, list[float]] = {}
    rules: dict[str, float] = {}
    for _ in range(readings):
        text = requests.get(f"{prometheus.url}/metrics", timeout=10).text
        for group, value in _own_metric(text, "prometheus_rule_group_last_duration_seconds").items():
            durations.setdefault(group, []).append(value)
        rules = _own_metric(text, "prometheus_rule_group_rules")
        time.sleep(1.0)  # one evaluation interval between readings
    series = int(float(prometheus.query('count({__name__=~"slo:.+"})')[0]["value"][1]))
    return [series, {g: (int(rules.get(g, 0)), statistics.median(d)) for g, d in durations.items()}]


COLUMNS = ("measure", "median", "each regression")


def cells(result: Result) -> list[list[str]]:
    """The result as the table shows it."""

    def each(values: list[float]) -> str:
        return ", ".join(f"{v:.2f}" for v in values)

    return [
        ["regression → page firing in Prometheus", f"{result.median_page_s:.2f} s", each(result.to_page_s)],
        ["regression → incident in the registry", f"{result.median_incident_s:.2f} s", each(result.to_incident_s)],
        [
            "regression → `rollout promote --auto`'s abort commit (a 3 s step judged first)",
            f"{result.median_abort_s:.2f} s",
            each(result.to_abort_commit_s),
        ],
        [
            "SLO rules per model: groups / rules / recorded series (2 Services)",
            f"{result.rule_groups_per_model} / {result.rules_per_model} / {result.recorded_series_per_model}",
            "—",
        ],
        ["rule evaluation per model and round", f"{result.rule_eval_ms_per_model:.3f} ms", "—"],
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one regression, rules read twice (CI); no results")
    parser.add_argument("-n", "--trials", type=int, default=5)
    parser.add_argument("--doc", action="store_true", help="also write docs/operations/results/slo.json")
    args = parser.parse_args()
    trials = 1 if args.quick else args.trials
    os.environ.update(git_env(dict(os.environ)))
    load_before = os.getloadavg()[0]
    pages, incidents, aborts = [], [], []
    stats: list[Any] = []
    with tempfile.TemporaryDirectory(prefix="trainops-bench-slo-") as tmp:
        os.environ["HOME"] = str(Path(tmp) / "home")
        os.environ.pop("KUBECONFIG", None)
        for n in range(trials):
            page, incident, abort, stats = _one(Path(tmp) / f"t{n}", readings=2 if args.quick else 10)
            pages.append(page)
            incidents.append(incident)
            aborts.append(abort)
            print(
                f"trial {n + 1}: page {page:.2f} s, incident {incident:.2f} s, abort commit {abort:.2f} s", flush=True
            )
    series, groups = stats
    result = Result(
        trials=trials, to_page_s=pages, to_incident_s=incidents, to_abort_commit_s=aborts,
        median_page_s=statistics.median(pages), median_incident_s=statistics.median(incidents),
        median_abort_s=statistics.median(aborts), recorded_series_per_model=series,
        rule_groups_per_model=len(groups), rules_per_model=sum(r for r, _ in groups.values()),
        rule_eval_ms_per_model=round(sum(d for _, d in groups.values()) * 1000, 3),
        load_before=load_before, load_after=os.getloadavg()[0],
    )  # fmt: skip
    print(f"regression → page firing   median {result.median_page_s:.2f} s  ({', '.join(f'{x:.2f}' for x in pages)})")
    print(f"regression → incident      median {result.median_incident_s:.2f} s")
    print(f"regression → abort commit  median {result.median_abort_s:.2f} s (promote --auto judges a 3 s step first)")
    print(f"rules per model: {result.rule_groups_per_model} groups, {result.rules_per_model} rules, "
          f"{series} recorded series (2 Services), "
          f"evaluation {result.rule_eval_ms_per_model:.3f} ms per round")  # fmt: skip
    print(f"load average {load_before:.2f} → {result.load_after:.2f} on {os.cpu_count()} CPUs")
    if not args.quick:
        out = ROOT / "bench" / "results" / "slo.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(asdict(result), indent=2) + "\n")
        print(f"wrote {out}")
    if args.doc:
        docresult.write(
            docresult.default_path("slo"),
            benchmark="slo",
            title="From a latency regression to the page, the incident and the abort, and the SLO rules' cost",
            load=docresult.Load.between(load_before, result.load_after),
            columns=COLUMNS,
            rows=cells(result),
        )


if __name__ == "__main__":
    main()
