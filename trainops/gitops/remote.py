"""The GitOps repository's URL: what kind it is, how to show it, what to keep out of messages.

Accepted forms are the ones git itself takes for a remote repository:

* ``file:///abs/path.git`` or ``/abs/path.git`` — a local repository (relative paths are
  the caller's to resolve, so they are refused rather than read against some directory);
* ``https://host/repo.git``, ``http://…``, ``ssh://[user@]host[:port]/repo.git``, ``git://…``;
* ``[user@]host:path`` (scp-like SSH).

Credentials stay git's business (credential helpers, SSH agent, ``url.*.insteadOf``). A
URL that carries some anyway is used as given, but it is never shown: in an http(s) URL
the whole ``user[:password]@`` part counts as a credential (tokens are often sent as the
user name), in other URLs the password does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from trainops.errors import InputError

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$", re.DOTALL)
_SCP = re.compile(r"^(?:[A-Za-z0-9._~%+-]+@)?[A-Za-z0-9.-]+:(?!//)\S+$")
_REMOTE_SCHEMES = {"http", "https", "ssh", "git", "git+ssh", "ssh+git"}
_HTTP = {"http", "https", "ftp", "ftps"}
# greedy up to the last "@" before the path, as URL parsers split it
_USERINFO = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]*)://([^/\s'\"]*)@")


@dataclass(frozen=True)
class Remote:
    """A parsed GitOps repository URL."""

    url: str  # what git is given, exactly as the caller wrote it
    display: str  # the URL with credentials removed: safe for messages and results
    local: Path | None  # the directory, for a local repository
    secrets: tuple[str, ...] = ()  # literal strings that must never appear in a message

    def scrub(self, text: str) -> str:
        """``text`` with this URL's credentials (and any URL-embedded ones) removed."""
        text = redact_url_text(text)
        for secret in self.secrets:
            text = text.replace(secret, "***")
        return text


def redact_url(url: str) -> str:
    """The URL without credentials: ``https://user:pw@host/x`` → ``https://host/x``.

    Outside http(s) only a password is removed (``ssh://git:pw@host`` → ``ssh://git@host``),
    since an SSH user name is not a secret.
    """
    return redact_url_text(url)


def redact_url_text(text: str) -> str:
    """Every ``scheme://userinfo@`` in ``text`` with its credentials removed."""

    def clean(match: re.Match[str]) -> str:
        scheme, userinfo = match.group(1), match.group(2)
        if scheme.lower() in _HTTP or not userinfo:
            return f"{scheme}://"
        return f"{scheme}://{userinfo.split(':', 1)[0]}@"

    return _USERINFO.sub(clean, text)


def parse_remote(repo: str) -> Remote:
    """Classify ``repo``; raise ``InputError`` for anything that is not a git URL we accept."""
    if not isinstance(repo, str) or not repo.strip():
        raise InputError("gitops repo is empty", hint="set it to a git URL or an absolute path")
    shown = redact_url(repo)
    if repo != repo.strip() or any(ord(c) < 0x20 for c in repo):
        raise InputError(f"gitops repo {shown!r} has surrounding whitespace or control characters")
    if repo.startswith("-"):
        raise InputError(f"gitops repo {shown!r} starts with '-'", hint="give a git URL or an absolute path")
    if re.match(r"^[A-Za-z0-9+.-]+::", repo):
        raise InputError(
            f"gitops repo {shown!r} names a git remote helper (TRANSPORT::ADDRESS)",
            hint="use file://, https://, http://, ssh://, git:// or user@host:path",
        )
    match = _SCHEME.match(repo)
    if match:
        scheme, rest = match.group(1).lower(), match.group(2)
        if scheme == "file":
            host, slash, tail = rest.partition("/")
            if not slash or host not in ("", "localhost"):
                raise InputError(
                    f"{shown} is not an absolute file URL",
                    hint="resolve relative paths first and pass file:///ABSOLUTE/PATH or /ABSOLUTE/PATH",
                )
            return Remote(url=repo, display=shown, local=Path(unquote("/" + tail)))
        if scheme not in _REMOTE_SCHEMES:
            raise InputError(
                f"{shown}: git URL scheme {scheme!r} is not supported",
                hint="use file://, https://, http://, ssh://, git:// or user@host:path",
            )
        return Remote(url=repo, display=shown, local=None, secrets=_secrets(repo, scheme))
    if repo.startswith("/"):
        return Remote(url=repo, display=shown, local=Path(repo))
    if _SCP.match(repo) and "/" not in repo.split(":", 1)[0]:
        return Remote(url=repo, display=shown, local=None)
    raise InputError(
        f"gitops repo {shown!r} is neither a git URL nor an absolute path",
        hint="resolve relative paths first (file:///ABSOLUTE/PATH), or use https://, ssh:// or user@host:path",
    )


def _secrets(url: str, scheme: str) -> tuple[str, ...]:
    try:
        parts = urlsplit(url)
        username, password = parts.username, parts.password
    except ValueError:
        return ()
    found = []
    # a long http user name is likely a token; a short one ("git", "oauth2") is not worth
    # blanking out of every message it happens to appear in
    long_user = username if scheme in _HTTP and username and len(username) >= 8 else None
    for value in (password, long_user):
        if value:
            found.append(value)
            if unquote(value) != value:
                found.append(unquote(value))
    # longest first, so that a secret containing another is replaced whole
    return tuple(sorted(set(found), key=len, reverse=True))
