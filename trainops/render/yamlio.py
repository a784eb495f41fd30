"""Objects to YAML text: stable key order (the builders' insertion order), no aliases, no folding."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import yaml


class _Dumper(yaml.SafeDumper):
    """The pure-Python safe dumper, so the text is the same with or without libyaml."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump_documents(objects: Iterable[dict[str, Any]], *, header: str = "") -> str:
    """Each object a YAML document opened by `---`, under `header` lines as comments."""
    docs = [
        yaml.dump(obj, Dumper=_Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True, width=2**16)
        for obj in objects
    ]
    lead = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines())
    return lead + "".join(f"---\n{doc}" for doc in docs)
