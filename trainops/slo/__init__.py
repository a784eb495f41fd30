"""Service levels declared once (spec.slo): what each engine and the training supervisor measure,
the Prometheus rules, monitors and dashboards rendered from them, and the alert loop that turns a
burning budget into an incident."""
