"""What `trainops ci` writes for a CI system: a Markdown step summary and JUnit XML."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from trainops.pipeline.ci import CiResult

_ICON = {"cached": "✅ cached", "ran": "✅ ran", "skipped": "⏭️ skipped", "failed": "❌ failed", "runs": "… runs"}


def _cell(text: str) -> str:
    """Markdown table cell: pipes and newlines escaped, HTML-significant characters too."""
    out = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return out.replace("|", "\\|").replace("\n", " ")


def markdown_summary(result: CiResult) -> str:
    span = result.span
    if span.after is None:
        rng = f"deleted branch (was `{(span.before or '')[:12]}`)"
    elif span.before:
        rng = f"`{span.before[:12]}..{span.after[:12]}`"
    else:
        rng = f"new branch at `{span.after[:12]}`"
    lines = [f"## trainops ci: {_cell(result.pipeline)}", "", f"Range {rng} ({span.origin})."]
    lines += ["", f"**Affected:** {_cell(result.decision.reason)}", ""]
    if result.run is None:
        lines.append("No stage runs for this change.")
        return "\n".join(lines) + "\n"
    if result.run.dry_run:
        lines += ["Dry run: nothing ran; what would run and why:", ""]
    lines += ["| stage | status | output / reason | time |", "| --- | --- | --- | --- |"]
    for stage in result.run.stages:
        shown = stage.error or ", ".join(o.ref or o.digest for o in stage.outputs) or stage.why
        status = _ICON.get(stage.status, stage.status)
        lines.append(f"| {stage.name} | {status} | {_cell(shown)} | {stage.seconds:.1f} s |")
    if result.run.error:
        lines += ["", f"**Error** (exit {result.exit_code}): {_cell(str(result.run.error))}"]
    return "\n".join(lines) + "\n"


def junit_xml(result: CiResult) -> str:
    """One testsuite; one testcase per stage (cached and ran pass, failed fails, the rest skip)."""
    suite = ET.Element("testsuite", name=f"trainops {result.pipeline}")
    stages = result.run.stages if result.run is not None else []
    failures = skipped = 0
    for stage in stages:
        case = ET.SubElement(suite, "testcase", classname=f"trainops.{result.pipeline}", name=stage.name)
        case.set("time", f"{stage.seconds:.3f}")
        if stage.status == "failed":
            failures += 1
            ET.SubElement(case, "failure", message=stage.error or "failed").text = stage.error or ""
        elif stage.status in ("skipped", "runs", "not-run"):
            skipped += 1
            ET.SubElement(case, "skipped", message=stage.why)
        else:
            ET.SubElement(case, "system-out").text = f"{stage.status}: {stage.why}"
    if not stages:
        case = ET.SubElement(suite, "testcase", classname=f"trainops.{result.pipeline}", name="affected-stages")
        ET.SubElement(case, "skipped", message=result.decision.reason)
        skipped = 1
    suite.set("tests", str(max(1, len(stages))))
    suite.set("failures", str(failures))
    suite.set("errors", "0")
    suite.set("skipped", str(skipped))
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
