"""What the GitOps repo says is served: the state file of the serving tree.

The serving tree holds, beside the Kubernetes objects, `trainops-rollout.json`: the stable
release, the canary (if a canary is under way) and the canary step it is at. It is the only
state trainops keeps; every action reads it from the branch tip and writes the next one in
the same commit as the objects it describes. The file holds nothing that changes without
the served releases changing (no times, no counters), so the tree of a release served as
stable is the same bytes whenever it is served again. Argo CD applies only `*.yaml` of the
directory (see the Application), so the file is never applied.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from trainops.errors import InputError
from trainops.registry.reference import parse_reference

if TYPE_CHECKING:
    from trainops.registry.reference import Reference

STATE_FILE = "trainops-rollout.json"


@dataclass(frozen=True)
class Served:
    """A release and the serving image it runs with, both pinned by digest."""

    release: str  # scheme-qualified reference with its digest, e.g. oci://host/ns/model:v1@sha256:…
    image: str  # host/repository@sha256:…
    data_properties: ClassVar[tuple[str, ...]] = ("version",)

    @property
    def reference(self) -> Reference:
        return parse_reference(self.release)

    @property
    def digest(self) -> str:
        digest = self.reference.digest
        if digest is None:
            raise InputError(
                f"the served release {self.release} is not pinned by digest", hint="restore the file from history"
            )
        return digest

    @property
    def version(self) -> str:
        """The release's tag, else its short digest: what `rollback --to` and `status` name."""
        return self.reference.tag or self.digest[:19]

    def matches(self, text: str) -> bool:
        """Whether `text` names this release: its tag, its digest (or a prefix of 12+), or its reference."""
        if text in (self.version, self.release, self.release.split("://", 1)[-1]):
            return True
        return text.startswith("sha256:") and len(text) >= 19 and self.digest.startswith(text)


@dataclass(frozen=True)
class RolloutState:
    """stable serves the rest of the traffic; canary takes canary.steps[step].weight percent."""

    stable: Served | None = None
    canary: Served | None = None
    step: int | None = None

    @property
    def in_progress(self) -> bool:
        return self.canary is not None

    def text(self) -> str:
        data = {
            "stable": _served(self.stable),
            "canary": _served(self.canary),
            "step": self.step,
        }
        return json.dumps(data, indent=2, sort_keys=True) + "\n"


def _served(value: Served | None) -> dict[str, str] | None:
    return None if value is None else {"release": value.release, "image": value.image}


def _parse_served(value: Any, where: str) -> Served | None:
    if value is None:
        return None
    if (
        not isinstance(value, dict)
        or not isinstance(value.get("release"), str)
        or not isinstance(value.get("image"), str)
    ):
        raise InputError(f"{where} in {STATE_FILE} is not {{release, image}}", hint="restore the file from history")
    if "@sha256:" not in value["release"]:
        raise InputError(f"{where}.release in {STATE_FILE} is not pinned by digest")
    return Served(value["release"], value["image"])


def parse_state(data: bytes | None) -> RolloutState:
    """The state a serving tree's file holds (nothing served when there is no file)."""
    if data is None:
        return RolloutState()
    try:
        raw = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise InputError(f"{STATE_FILE} in the GitOps repo is not JSON: {err}") from None
    if not isinstance(raw, dict):
        raise InputError(f"{STATE_FILE} in the GitOps repo is not a JSON object")
    step = raw.get("step")
    if step is not None and (not isinstance(step, int) or step < 0):
        raise InputError(f"step in {STATE_FILE} is {step!r}, not a step index")
    return RolloutState(_parse_served(raw.get("stable"), "stable"), _parse_served(raw.get("canary"), "canary"), step)
