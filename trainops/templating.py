"""Jinja2 rendering of the text files trainops ships in templates/ (inside the wheel)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from trainops.errors import NotFoundError


def template_root() -> Path:
    """templates/ of the source tree, or its copy inside an installed wheel."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "_templates", here.parent / "templates"):
        if candidate.is_dir():
            return candidate
    raise NotFoundError(
        "the templates directory is missing from this installation",
        hint="reinstall trainops (`pip install --force-reinstall trainops`)",
    )


@lru_cache(maxsize=1)
def _environment() -> Any:
    import jinja2  # lazy: loads jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(template_root())),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )


def render_template(name: str, /, **values: Any) -> str:
    """Render templates/<name> with values; a missing value is an error, never an empty string."""
    import jinja2  # lazy: loads jinja2

    try:
        return str(_environment().get_template(name).render(**values))
    except jinja2.TemplateNotFound:
        raise NotFoundError(f"no template {name!r} in {template_root()}") from None
