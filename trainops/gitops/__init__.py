"""The GitOps repository: write rendered trees, commit with trailers, push with retry; history.

``write_tree`` makes one directory of one branch hold exactly the given files, in one
commit whose trailers (``Trainops-Pipeline: …``) ``git interpret-trailers --parse`` reads
back, pushed with fetch-and-reapply when another writer got there first. ``history``
reads those commits back, newest first; ``read_tree`` reads a directory's files at the tip
or at an earlier commit. History is never rewritten: every change,
promote and rollback included, is a new commit, so ``git log`` is the audit trail.

git runs through `trainops.gitinfo.git`, the one git runner, only when a function is called.
"""

from __future__ import annotations

from trainops.gitops.history import HistoryEntry, history
from trainops.gitops.read import TreeSnapshot, read_tree
from trainops.gitops.write import CommitResult, write_tree

__all__ = ["CommitResult", "HistoryEntry", "TreeSnapshot", "history", "read_tree", "write_tree"]
