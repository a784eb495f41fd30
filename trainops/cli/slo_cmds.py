"""`trainops slo` (status, rules) and `trainops alerts serve`: service levels and the alert loop."""

from __future__ import annotations

import click

from trainops.cli import options
from trainops.cli.options import manifest_options, output_option
from trainops.cli.output import echo_columns, echo_json


@click.group()
def slo() -> None:
    """Service levels declared in spec.slo: their status and their Prometheus rules."""


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.3f}%"


@slo.command("status")
@manifest_options
@click.option("--prometheus", metavar="URL", default=None, help="Prometheus to read; default: spec.slo.prometheus.")
@output_option
def status_cmd(file: str | None, env: str | None, prometheus: str | None, output: str) -> None:
    """Each SLO's SLI now, error budget left and burn rates, per model Service or run."""
    from trainops.rollout.slo_status import status  # lazy: loads pydantic

    report = status(options.load(file, env), prometheus=prometheus)
    if output == "json":
        echo_json(report)
        return
    rows = []
    for item in report.slos:
        if not item.series:
            rows.append((item.slo, "-", f"{item.objective:g}%", "no data", "-", "-"))
        for series in item.series:
            who = series.labels.get("service") or series.labels.get("run") or series.labels.get("model_name", "-")
            burns = " ".join(f"{b.window}:{b.burn_rate:.3g}" for b in series.burn_rates)
            rows.append((item.slo, who, f"{item.objective:g}%", _percent(series.sli_now),
                         _percent(series.budget_left), burns or "-"))  # fmt: skip
    echo_columns(f"SLOs ({report.prometheus})", ("slo", "of", "objective", "sli now", "budget left", "burn rates"),
                 rows)  # fmt: skip


@slo.command("rules")
@manifest_options
def rules_cmd(file: str | None, env: str | None) -> None:
    """The SLOs' rules as a plain Prometheus rule file (rule_files:), for a Prometheus without the operator."""
    import yaml

    from trainops.rollout.render import rule_file_of  # lazy: loads pydantic

    click.echo(yaml.safe_dump(rule_file_of(options.load(file, env)), sort_keys=False, width=1000), nl=False)


@click.group()
def alerts() -> None:
    """The alert loop: Alertmanager's notifications recorded as incidents."""


@alerts.command("serve")
@manifest_options
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=9095, show_default=True, type=click.IntRange(0, 65535), help="Port to bind.")
@click.option(
    "--token", envvar="TRAINOPS_ALERTS_TOKEN", default=None, help="The shared token (env TRAINOPS_ALERTS_TOKEN)."
)
@options.insecure_option
def serve_cmd(file: str | None, env: str | None, host: str, port: int, token: str | None, insecure: bool) -> None:
    """Receive Alertmanager's webhook (POST /alerts, Bearer token) and record each SLO alert as an incident."""
    from trainops.ui.alert_receiver import Receiver  # lazy: loads pydantic

    receiver = Receiver(options.load(file, env), host=host, port=port, token=token, insecure=insecure)
    click.echo(f"receiving Alertmanager notifications at {receiver.url} (Ctrl-C stops)", err=True)
    receiver.serve_forever()


COMMANDS = [slo, alerts]
