"""Names and labels of rendered objects: object names that fit their limits, common labels.

A run is a new object: its name is `<pipeline>-<run-id>`, so Argo CD creates it instead of
patching the previous run's (most fields of a Job's pod template are immutable). Names that
would not fit are cut and given a hash of the full name, so two runs never share one.

The limit is not always 63: pods take their hostname from the pod name (Volcano
`<job>-<task>-<index>`, JobSet `<jobset>-<replicatedJob>-<job>-<pod>`, Indexed Job
`<job>-<index>`), and a hostname longer than 63 characters is refused when the pod is
created, long after the job was admitted. Each target reserves room for its suffix.
"""

from __future__ import annotations

import hashlib
import re

from trainops.errors import InputError

DNS_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_1035_RE = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_NAME_RE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
COMMIT_RE = re.compile(r"^[0-9a-f]{7,64}(-dirty)?$")  # git_state marks uncommitted changes with -dirty

MAX_LABEL = 63
MANAGED_BY = "trainops"
LABEL_PIPELINE = "trainops.dev/pipeline"
LABEL_RUN_ID = "trainops.dev/run-id"
LABEL_ROLE = "trainops.dev/role"
ANNOTATION_IMAGE = "trainops.dev/image"
ANNOTATION_COMMIT = "trainops.dev/commit"


def check_commit(commit: str | None) -> str | None:
    if commit is not None and not COMMIT_RE.match(commit):
        raise InputError(f"commit {commit!r} is not a git commit id", hint="pass its hex sha (-dirty allowed)")
    return commit


def object_name(pipeline: str, run_id: str, *, reserve: int = 0) -> str:
    """`<pipeline>-<run_id>`, at most 63 - reserve characters, starting with a letter.

    Services (and so the pods' DNS subdomain) need a DNS-1035 label, which starts with a
    letter; a pipeline named like `7b-llm` gets a `t` in front.
    """
    limit = MAX_LABEL - reserve
    full = f"{pipeline}-{run_id}"
    if not full[0].isalpha():
        full = f"t{full}"
    if len(full) <= limit:
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:8]
    keep = limit - len(digest) - 1
    if keep < 1:
        raise InputError(f"no room for a name of {pipeline!r} run {run_id!r}", hint="use a shorter run id")
    return f"{full[:keep].rstrip('-')}-{digest}"


def digits(n: int) -> int:
    """How many characters the largest index below n takes (at least one)."""
    return len(str(max(n - 1, 0)))


def common_labels(pipeline: str, *, run_id: str | None, component: str, extra: dict[str, str]) -> dict[str, str]:
    """The labels every object gets; the manifest's metadata.labels come first, ours win."""
    labels = dict(extra)
    labels.update(
        {
            "app.kubernetes.io/name": pipeline,
            "app.kubernetes.io/component": component,
            "app.kubernetes.io/managed-by": MANAGED_BY,
            LABEL_PIPELINE: pipeline,
        }
    )
    if run_id is not None:
        labels[LABEL_RUN_ID] = run_id
    return labels
