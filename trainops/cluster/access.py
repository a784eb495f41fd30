"""Which cluster a command reads: one `ClusterAccess` value (kubeconfig, context, and how the
kubeconfig was found), made once where the user names it and passed whole to
`trainops.cluster.client.connect`.

How the kubeconfig is found is kubectl's rule: the file given (--kubeconfig), else the first
existing file of $KUBECONFIG, else ~/.kube/config. `named` is what a command's --kubeconfig,
--context (and --cluster: "the user's own") make of it; `users_own` is the discovery of a
command that reads a cluster only when one is there (`rollout promote` under Argo).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

DEFAULT_KUBECONFIG = "~/.kube/config"
Found = Literal["--kubeconfig", "$KUBECONFIG", "~/.kube/config"]


@dataclass(frozen=True)
class ClusterAccess:
    """A kubeconfig (None: the user's own, found as the module docstring says) and a context
    (None: the kubeconfig's current one)."""

    kubeconfig: str | None = None
    context: str | None = None

    @classmethod
    def named(
        cls, kubeconfig: str | Path | None, context: str | None, *, cluster: bool = False
    ) -> ClusterAccess | None:
        """The cluster the user named (--kubeconfig, --context, or --cluster for their own); None: none named."""
        if kubeconfig is None and context is None and not cluster:
            return None
        return cls(str(kubeconfig) if kubeconfig is not None else None, context)

    @classmethod
    def users_own(cls) -> ClusterAccess | None:
        """The user's own cluster when they have a kubeconfig ($KUBECONFIG set, or ~/.kube/config there)."""
        access = cls()
        return access if access.found == "$KUBECONFIG" or access.path.is_file() else None

    @property
    def found(self) -> Found:
        """How the kubeconfig is found: given, from $KUBECONFIG, or the default file."""
        if self.kubeconfig:
            return "--kubeconfig"
        return "$KUBECONFIG" if _listed() else "~/.kube/config"

    @property
    def path(self) -> Path:
        """The kubeconfig to read: the one given, else the first file of $KUBECONFIG, else ~/.kube/config."""
        if self.kubeconfig:
            return Path(self.kubeconfig).expanduser()
        listed = _listed()
        for part in listed:
            if Path(part).expanduser().is_file():
                return Path(part).expanduser()
        return Path(listed[0] if listed else DEFAULT_KUBECONFIG).expanduser()


def _listed() -> list[str]:
    return [part for part in os.environ.get("KUBECONFIG", "").split(os.pathsep) if part]
