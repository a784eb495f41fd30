"""The build context: which files go in (include, exclude, .dockerignore), and reproducible tars.

Selection, in order: `.git/` and `.trainops/` (the local registry) are never sent, nor is
the manifest itself unless `image.include` names it; a file must match one of
`image.include` (if any is given); then `.dockerignore` (Docker's rules:
Go-style globs with `**`, `!` exceptions, last match wins, a pattern matching a directory
covers everything under it) and `image.exclude` (same globs, applied last, so they win
over a `!` exception) leave files out.

Tars are reproducible: entries sorted by path, every parent directory present, fixed
mtime (2000-01-01, which zip-based tools accept, unlike 1970), owner 0:0 with no user or
group names, modes normalised to 0644/0755 (0777 for symlinks), PAX format. The same
files give the same bytes on any machine, whatever their mtimes, owners or umask.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import stat
import tarfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO, Literal

from trainops.errors import InputError, NotFoundError

PORTABLE_MTIME = 946684800  # 2000-01-01T00:00:00Z
NEVER_SENT = (".git", ".trainops")
DOCKERIGNORE = ".dockerignore"
HASH_CHUNK = 1024 * 1024


# -- patterns ------------------------------------------------------------------------------


class PatternSet:
    """Globs matched as .dockerignore matches them, by docker-py's own matcher
    (`docker.utils.build.PatternMatcher`): every pattern in order, the last that applies
    decides, and a pattern that matches a directory covers everything in it.

    select_context walks as docker-py's `PatternMatcher.walk` does: an ignored directory
    is skipped whole unless an exception reaches into it (`exception_under`). On top, one
    helper of ours: `may_match_under` tells when no image.include pattern can match inside
    a directory, so the walk need not descend into it. tests/image/test_context.py checks
    on 143 pattern sets that the selection is exactly docker-py's.
    """

    def __init__(self, patterns: Iterable[str], origin: str, *, negatable: bool = True) -> None:
        from docker.utils.build import PatternMatcher  # lazy: loads docker

        lines = [p.strip() for p in patterns if p.strip()]
        if not negatable and any(p.startswith("!") for p in lines):
            bad = next(p for p in lines if p.startswith("!"))
            raise InputError(f"{origin}: pattern {bad!r} cannot be an exception (!)", hint="list what to include")
        self._matcher = PatternMatcher(lines)
        # docker-py appends "!.dockerignore" (the file is always sent); ours are the others
        self.patterns = [p for p in self._matcher.patterns[:-1]]
        for pattern in self.patterns:
            try:
                pattern.match("x")
            except re.error as err:
                raise InputError(f"{origin}: pattern {pattern.cleaned_pattern!r} is malformed ({err.msg})") from None
        self._prefixes = [_literal_prefix(p.dirs) for p in self.patterns]

    def __bool__(self) -> bool:
        return bool(self.patterns)

    def matches(self, relpath: str) -> bool:
        return bool(self._matcher.matches(relpath))

    def exception_under(self, reldir: str) -> bool:
        """Whether an exception (!pattern) names something in reldir: docker-py's walk skips
        an ignored directory otherwise, whatever is inside."""
        return any(p.exclusion and p.cleaned_pattern.startswith(reldir) for p in self.patterns)

    def may_match_under(self, reldir: str) -> bool:
        """Whether some pattern could match a path inside reldir (False lets a walk prune it)."""
        parts = tuple(reldir.lower().split("/"))
        for prefix in self._prefixes:
            k = min(len(prefix), len(parts))
            if prefix[:k] == parts[:k]:
                return True
        return False


def _literal_prefix(dirs: list[str]) -> tuple[str, ...]:
    """The leading components of a pattern without glob characters (lowercased, as docker-py
    matches without case)."""
    prefix: list[str] = []
    for part in dirs:
        if any(c in part for c in "*?[]\\"):
            break
        prefix.append(part.lower())
    return tuple(prefix)


def read_dockerignore(context: Path) -> list[str]:
    path = context / DOCKERIGNORE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as err:
        raise InputError(f"cannot read {path}: {err.strerror}") from None
    text = raw.decode("utf-8", "replace").lstrip("\ufeff")
    return [line for line in text.splitlines() if not line.startswith("#")]


# -- selection -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ContextEntry:
    """A file or symlink of the build context."""

    relpath: str  # posix, relative to the context root
    path: Path
    kind: Literal["file", "symlink"]
    mode: int  # normalised: 0o644 or 0o755 for files, 0o777 for symlinks
    size: int
    linkname: str = ""
    digest: str = ""  # sha256 of a file's content, once hashed

    def identity(self) -> list[str]:
        """What the inputs digest records of this entry."""
        what = self.digest if self.kind == "file" else f"-> {self.linkname}"
        return [self.relpath, self.kind, f"{self.mode:04o}", what]


@dataclass(frozen=True)
class Selection:
    root: Path
    entries: list[ContextEntry]
    dockerignore: bool  # whether a .dockerignore was applied

    @property
    def total_bytes(self) -> int:
        return sum(e.size for e in self.entries)


def select_context(
    root: Path, *, include: Sequence[str] = (), exclude: Sequence[str] = (), manifest: Path | None = None
) -> Selection:
    """The files of the build context, sorted by path (not yet hashed).

    The manifest file (trainops.yaml), when it lies in the context, is left out unless an
    include pattern names it: its image section is already an input of the build, and a
    change to its train or rollout sections must not make a new image.
    """
    if not root.exists():
        raise NotFoundError(f"build context {root} does not exist", hint="set image.context to a directory")
    if not root.is_dir():
        raise InputError(f"build context {root} is not a directory", hint="set image.context to a directory")
    includes = PatternSet(include, "image.include", negatable=False)
    ignore_lines = read_dockerignore(root)
    ignored = PatternSet([*ignore_lines, *exclude], f"{root / DOCKERIGNORE} or image.exclude")
    entries: list[ContextEntry] = []
    skip = ""
    if manifest is not None and manifest.resolve().is_relative_to(root.resolve()):
        skip = manifest.resolve().relative_to(root.resolve()).as_posix()

    def wanted(rel: str) -> bool:
        if rel == skip and not (includes and includes.matches(rel)):
            return False
        return (not includes or includes.matches(rel)) and not ignored.matches(rel)

    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        reldir = here.relative_to(root).as_posix()
        reldir = "" if reldir == "." else reldir
        keep_dirs: list[str] = []
        for name in sorted(dirnames):
            rel = f"{reldir}/{name}" if reldir else name
            full = here / name
            if name == ".git" or (not reldir and name in NEVER_SENT):
                continue
            if full.is_symlink():
                if wanted(rel):
                    entries.append(_symlink(full, rel))
                continue
            if ignored.matches(rel) and not ignored.exception_under(rel):
                continue  # an ignored directory no exception reaches into is skipped whole
            if includes and not includes.matches(rel) and not includes.may_match_under(rel):
                continue
            keep_dirs.append(name)
        dirnames[:] = keep_dirs
        for name in sorted(filenames):
            rel = f"{reldir}/{name}" if reldir else name
            if not wanted(rel):
                continue
            full = here / name
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                entries.append(_symlink(full, rel))
            elif stat.S_ISREG(st.st_mode):
                mode = 0o755 if st.st_mode & 0o111 else 0o644
                entries.append(ContextEntry(rel, full, "file", mode, st.st_size))
            # sockets, fifos and devices are never part of a context
    entries.sort(key=lambda e: e.relpath.split("/"))
    return Selection(root=root, entries=entries, dockerignore=bool(ignore_lines))


def _symlink(full: Path, rel: str) -> ContextEntry:
    return ContextEntry(rel, full, "symlink", 0o777, 0, linkname=os.readlink(full))


def hash_entries(selection: Selection) -> Selection:
    """The selection with every file's sha256 (from the digest cache when unchanged)."""
    from trainops.registry.digestcache import DigestCache  # lazy: loads sqlite3

    cache = DigestCache()
    hashed: list[ContextEntry] = []
    for entry in selection.entries:
        if entry.kind != "file":
            hashed.append(entry)
            continue
        try:
            digest, size = cache.digest(entry.path)
        except FileNotFoundError:
            raise InputError(
                f"{entry.path} disappeared while the build context was read", hint="run the build again"
            ) from None
        hashed.append(replace(entry, digest=digest, size=size))
    return replace(selection, entries=hashed)


SCAN_LIMIT = 16 * 1024 * 1024


def find_secret(
    selection: Selection, values: dict[str, bytes], min_length: int = 8, max_file: int = SCAN_LIMIT
) -> tuple[str, str] | None:
    """(file, secret id) of the first context file that contains a secret's value, or None.

    Values shorter than min_length are not searched for (they match by chance), nor are
    files larger than max_file (data and weights: a token pasted into code or a notebook
    is what this catches, and it must not cost a full read of a dataset on every build).
    """
    needles = {sid: v for sid, v in values.items() if len(v) >= min_length}
    if not needles:
        return None
    overlap = max(len(v) for v in needles.values()) - 1
    for entry in selection.entries:
        if entry.kind != "file" or entry.size > max_file:
            continue
        tail = b""
        with entry.path.open("rb") as fh:
            while chunk := fh.read(HASH_CHUNK):
                window = tail + chunk
                for sid, value in needles.items():
                    if value in window:
                        return entry.relpath, sid
                tail = window[-overlap:] if overlap else b""
    return None


# -- reproducible tars ---------------------------------------------------------------------


@dataclass(frozen=True)
class Member:
    """An entry of a tar to write: a file from disk or from bytes, or a symlink."""

    name: str  # path in the tar, no leading '/'
    kind: Literal["file", "symlink", "dir"]
    mode: int
    source: Path | None = None
    data: bytes | None = None
    size: int = 0
    digest: str = ""  # expected sha256 of a file from disk (checked while it is written)
    linkname: str = ""


def members_of(selection: Selection, prefix: str) -> list[Member]:
    """Tar members for the context's entries, placed under prefix ('' for the tar's root)."""
    out: list[Member] = []
    for e in selection.entries:
        name = f"{prefix}/{e.relpath}" if prefix else e.relpath
        if e.kind == "symlink":
            out.append(Member(name, "symlink", 0o777, linkname=e.linkname))
        else:
            out.append(Member(name, "file", e.mode, source=e.path, size=e.size, digest=e.digest))
    return out


class HashingWriter:
    """A write-only stream that hashes and counts what passes through to out (if any)."""

    def __init__(self, out: BinaryIO | None = None) -> None:
        self.out = out
        self.hash = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.hash.update(data)
        self.size += len(data)
        if self.out is not None:
            self.out.write(data)
        return len(data)

    def flush(self) -> None:
        if self.out is not None:
            self.out.flush()

    @property
    def digest(self) -> str:
        return "sha256:" + self.hash.hexdigest()


class _HashingReader(io.RawIOBase):
    def __init__(self, fh: BinaryIO) -> None:
        self.fh = fh
        self.hash = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        data = self.fh.read(size)
        self.hash.update(data)
        return data


def _info(name: str, kind: str, mode: int, size: int = 0, linkname: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = {"file": tarfile.REGTYPE, "dir": tarfile.DIRTYPE, "symlink": tarfile.SYMTYPE}[kind]
    info.mode = mode
    info.size = size if kind == "file" else 0
    info.linkname = linkname
    info.mtime = PORTABLE_MTIME
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def write_tar(members: Sequence[Member], out: BinaryIO) -> None:
    """Write members (and their parent directories) as a reproducible tar to out."""
    by_name: dict[str, Member] = {}
    for member in members:
        name = member.name.strip("/")
        if not name or name in by_name:
            raise InputError(f"two build inputs claim the path {member.name!r}")
        by_name[name] = replace(member, name=name)
    for name in list(by_name):
        parts = name.split("/")
        for i in range(1, len(parts)):
            parent = "/".join(parts[:i])
            existing = by_name.get(parent)
            if existing is None:
                by_name[parent] = Member(parent, "dir", 0o755)
            elif existing.kind != "dir":
                raise InputError(f"{parent!r} is both a file and a directory in the build inputs")
    with tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT, encoding="utf-8") as tar:
        for name in sorted(by_name, key=lambda n: n.split("/")):
            member = by_name[name]
            if member.kind == "dir":
                tar.addfile(_info(name, "dir", 0o755))
            elif member.kind == "symlink":
                tar.addfile(_info(name, "symlink", 0o777, linkname=member.linkname))
            elif member.data is not None:
                tar.addfile(_info(name, "file", member.mode, len(member.data)), io.BytesIO(member.data))
            else:
                assert member.source is not None
                _add_file(tar, member)


def _add_file(tar: tarfile.TarFile, member: Member) -> None:
    assert member.source is not None
    try:
        fh = member.source.open("rb")
    except FileNotFoundError:
        raise InputError(f"{member.source} disappeared while the build ran", hint="run the build again") from None
    with fh:
        size = os.fstat(fh.fileno()).st_size
        if member.digest and size != member.size:
            raise _changed(member.source)
        reader = _HashingReader(fh)
        try:
            tar.addfile(_info(member.name, "file", member.mode, size), reader)
        except OSError as err:  # tarfile: "unexpected end of data" when the file shrank
            raise _changed(member.source) from err
        if member.digest and "sha256:" + reader.hash.hexdigest() != member.digest:
            raise _changed(member.source)


def _changed(path: Path) -> InputError:
    return InputError(f"{path} changed while the image was being built", hint="nothing was pushed; build again")
