"""A local copy of each repository's all-tasks table, task tables and record of what was
derived (`bundler.hub.leaderboard.record`), so that reading a branch whose tables have not
changed downloads none of them: a nightly run with nothing new then reads a few hundred bytes
of the Hub's answers at any size, where the table holds a row per bundle (about 100 bytes a
bundle, 10 MB at 100,000 bundles).

The branch's listing gives the table's sha256 (or git blob id) before anything is downloaded,
and a copy holding exactly those bytes is as good as the Hub's. A few copies per endpoint,
repository and file, in a folder of their own under HF_HOME (`statics-bundler/tables/`, so
that finding them lists no other file's: an audit of 3,000 parts took 18 s to find its copies
in one folder, 0.2 s in a folder each), one written atomically whenever a file is read from
the Hub or written by a commit (the bytes a commit is about to write are kept before it is
made: a commit that then fails leaves a copy that matches no listing, which is never used).
Any copy that does not hold the listed bytes is ignored, so a stale, corrupt
or planted copy costs only the download it saves (so copies are not fsynced: a fresh runner
keeps one per part of the table; measured at 30,000 bundles, 1.33 s an upload against 1.39 s
fsynced, 5 rounds alternating, every one faster); no link is followed, and a copy that cannot
be written (a read-only home) is simply not kept.
"""

from __future__ import annotations

import contextlib
import hashlib
from pathlib import Path

from huggingface_hub import constants

from bundler.core.errors import InputError, WriteError
from bundler.hub.client.remote import RemoteFile, holds_bytes
from bundler.hub.client.session import HubSession
from bundler.local.fileio import read_bounded, write_atomically

CACHE_FOLDER = ("statics-bundler", "tables")
KEPT_COPIES = 3
"""Copies kept of each file, the newest: a dry run or a failed commit keeps bytes that never
reach the branch, and must not push out the copy of the bytes that did."""


def _copies_of(session: HubSession, path: str) -> tuple[Path, str]:
    """The folder of the copies of this file (one a file: finding them lists its own copies
    only, not those of thousands of parts) and the start of the name of each copy."""
    where = f"{session.api.endpoint}\0{session.repo_id}\0{path}"
    key = hashlib.sha256(where.encode()).hexdigest()[:32]
    return Path(constants.HF_HOME, *CACHE_FOLDER, key), f"{key}-"


def _kept(folder: Path, prefix: str) -> list[Path]:
    """The copies of one file, newest first."""
    try:
        copies = [entry for entry in folder.iterdir() if entry.name.startswith(prefix)]
    except OSError:
        return []
    return sorted(copies, key=_modified, reverse=True)


def _modified(path: Path) -> float:
    try:
        return path.lstat().st_mtime
    except OSError:
        return 0.0


def cached_table(session: HubSession, path: str, listed: RemoteFile, limit: int) -> bytes | None:
    """A kept copy of the session's file at `path` holding exactly the bytes `listed` names."""
    for copy in _kept(*_copies_of(session, path))[:KEPT_COPIES]:
        try:
            data = read_bounded(copy, limit)
        except InputError:
            continue
        if holds_bytes(listed, data):
            return data
    return None


def keep_table(session: HubSession, path: str, data: bytes) -> None:
    """Keep `data` as a copy of the session's file at `path` (best effort), and drop the
    oldest copies past KEPT_COPIES."""
    folder, prefix = _copies_of(session, path)
    name = f"{prefix}{hashlib.sha256(data).hexdigest()[:16]}{Path(path).suffix}"
    with contextlib.suppress(OSError, WriteError):
        write_atomically(folder / name, data, durable=False)
    for stale in _kept(folder, prefix)[KEPT_COPIES:]:
        with contextlib.suppress(OSError):
            stale.unlink()
