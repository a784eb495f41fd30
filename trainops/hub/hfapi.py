"""huggingface_hub behind one door: imported lazily, its settings read at call time, its
exceptions turned into TrainopsErrors with one line that says what to do next.

huggingface_hub reads HF_ENDPOINT, HF_HUB_OFFLINE and HF_HUB_CACHE once, when it is first imported; a
long-lived process (or a test) that changes them later would be ignored, so the values
are read here at every call and passed explicitly (the offline flag, which its HTTP layer
consults, is set on its constants module before each call). HF_TOKEN is passed the same way; when
it is unset, huggingface_hub's own lookup (the token file of `hf auth login`) applies.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from trainops.errors import ExistsError, InputError, NotFoundError, RemoteError, TrainopsError

DEFAULT_ENDPOINT = "https://huggingface.co"
_TRUE = {"1", "on", "yes", "true"}
REPO_ID = re.compile(r"^(?:[A-Za-z0-9][A-Za-z0-9._-]{0,95}/)?[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
COMMIT = re.compile(r"^[0-9a-f]{40}$")


@dataclass(frozen=True)
class HubSettings:
    """Where the Hub is and how to reach it, as the environment says now."""

    endpoint: str
    token: str | None
    offline: bool
    cache: str | None  # HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub

    @classmethod
    def from_env(cls) -> HubSettings:
        offline = (os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or "").lower()
        return cls(
            endpoint=(os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/"),
            token=os.environ.get("HF_TOKEN") or None,
            offline=offline in _TRUE,
            cache=os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE") or _default_cache(),
        )

    def repo_url(self, repo_id: str) -> str:
        return f"{self.endpoint}/{repo_id}"


def _default_cache() -> str:
    """huggingface_hub's default: $HF_HOME/hub, HF_HOME defaulting to $XDG_CACHE_HOME/huggingface."""
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "huggingface"
    )
    return os.path.join(os.path.expanduser(home), "hub")


def parse_repo_spec(text: str) -> tuple[str, str | None]:
    """`org/name[@revision]` → (repo id, revision or None); a malformed id is an InputError."""
    repo_id, sep, revision = text.partition("@")
    if not REPO_ID.match(repo_id) or ".." in repo_id or repo_id.endswith((".git", ".")):
        raise InputError(
            f"{repo_id!r} is not a Hugging Face repo id",
            hint="write ORG/NAME or NAME, optionally @REVISION (a branch, tag or commit)",
        )
    if sep and not revision:
        raise InputError(f"{text!r} names an empty revision", hint="write ORG/NAME@REVISION or leave @ out")
    return repo_id, (revision or None)


def _is_network_error(err: BaseException) -> bool:
    module = type(err).__module__ or ""
    return isinstance(err, (OSError, TimeoutError)) or module.split(".")[0] in ("httpx", "httpx2", "httpcore")


def _status(err: BaseException) -> int | None:
    response = getattr(err, "response", None)
    code = getattr(response, "status_code", None)
    return code if isinstance(code, int) else None


@contextmanager
def hub_errors(what: str, *, settings: HubSettings) -> Iterator[None]:
    """Run Hub calls; map huggingface_hub's exceptions to one-line TrainopsErrors about `what`."""
    from huggingface_hub import constants  # lazy: loads huggingface_hub
    from huggingface_hub import errors as hf  # lazy: loads huggingface_hub

    constants.HF_HUB_OFFLINE = settings.offline  # its HTTP layer asks this flag, read at import
    try:
        yield
    except TrainopsError:
        raise
    except hf.GatedRepoError:
        raise NotFoundError(
            f"{what} is gated and this token may not read it",
            hint="accept its conditions on the Hub, then set HF_TOKEN to a token of that account",
        ) from None
    except hf.RepositoryNotFoundError:
        auth = "with HF_TOKEN" if settings.token else "without a token (HF_TOKEN is unset)"
        raise NotFoundError(
            f"{what}: no such repository at {settings.endpoint}, or it is private and was asked {auth}",
            hint="check the repo id; for a private repo set HF_TOKEN",
        ) from None
    except hf.RevisionNotFoundError:
        raise NotFoundError(f"{what}: no such revision", hint="name an existing branch, tag or commit") from None
    except hf.LocalEntryNotFoundError as err:
        cause = err.__cause__
        if not settings.offline and cause is not None and not isinstance(cause, hf.OfflineModeIsEnabled):
            raise RemoteError(
                f"{what}: the Hub at {settings.endpoint} could not be reached ({type(cause).__name__}) "
                "and the HF cache does not hold it",
                hint="check HF_ENDPOINT and the network, then retry",
            ) from None
        raise NotFoundError(
            f"{what} is not in the Hugging Face cache and the Hub may not be asked (offline)",
            hint="download it once online, point --from-dir at a snapshot, or unset HF_HUB_OFFLINE",
        ) from None
    except hf.HFValidationError as err:
        raise InputError(f"{what}: {_first_line(err)}") from None
    except hf.HfHubHTTPError as err:
        raise _http_error(what, err) from None
    except Exception as err:
        if _is_network_error(err):
            raise RemoteError(
                f"{what}: the Hub at {settings.endpoint} could not be reached "
                f"({type(err).__name__}: {_first_line(err)})",
                hint="check HF_ENDPOINT and the network, then retry",
            ) from None
        raise


def _http_error(what: str, err: BaseException) -> TrainopsError:
    status = _status(err)
    if status == 412:
        return ExistsError(
            f"{what}: the branch moved on the Hub since this upload started (someone else committed)",
            hint="look at the new commits; export again to upload on top of them; nothing was changed",
        )
    if status in (401, 403):
        return RemoteError(
            f"{what}: the Hub refused this token (HTTP {status})",
            hint="set HF_TOKEN to a token with write access to the repository",
        )
    return RemoteError(f"{what}: the Hub answered HTTP {status}: {_first_line(err)}", hint="retry later")


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
