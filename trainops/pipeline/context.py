"""What every stage of a run needs from the manifest: the train section and a run id
(registries: `Registries.for_manifest`; the checkpoint repository:
`trainops.checkpoint.catalog.checkpoint_repository`; the pinned training image:
`trainops.build.pinned.training_image`)."""

from __future__ import annotations

import secrets
import time


def new_run_id(prefix: str = "run") -> str:
    """A fresh run id: DNS-label safe, sortable by time, unique across machines."""
    return f"{prefix}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{secrets.token_hex(3)}"
