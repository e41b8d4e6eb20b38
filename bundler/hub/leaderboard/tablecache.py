"""A local copy of each repository's all-tasks table, so that reading a branch whose table has
not changed downloads no table: a nightly run with nothing new then reads a few hundred bytes
of the Hub's answers at any size, where the table holds a row per bundle (about 100 bytes a
bundle, 10 MB at 100,000 bundles).

The branch's listing gives the table's sha256 (or git blob id) before anything is downloaded,
and a copy holding exactly those bytes is as good as the Hub's. One file per endpoint,
repository and table under HF_HOME (`statics-bundler/tables/`), replaced atomically whenever a
table is read from the Hub or written by a commit (the bytes a commit is about to write are
kept before it is made: a commit that then fails leaves a copy that matches no listing, which
is never used). Any copy that does not hold the listed bytes is ignored, so a stale, corrupt
or planted copy costs only the download it saves; no link is followed, and a copy that cannot
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


def _copy_of(session: HubSession, path: str) -> Path:
    where = f"{session.api.endpoint}\0{session.repo_id}\0{path}"
    key = hashlib.sha256(where.encode()).hexdigest()[:32]
    return Path(constants.HF_HOME, *CACHE_FOLDER, f"{key}{Path(path).suffix}")


def cached_table(session: HubSession, path: str, listed: RemoteFile, limit: int) -> bytes | None:
    """The kept copy of the session's table at `path`, if it holds exactly the bytes `listed`
    names."""
    try:
        data = read_bounded(_copy_of(session, path), limit)
    except InputError:
        return None
    return data if holds_bytes(listed, data) else None


def keep_table(session: HubSession, path: str, data: bytes) -> None:
    """Keep `data` as the copy of the session's table at `path` (best effort)."""
    with contextlib.suppress(OSError, WriteError):
        write_atomically(_copy_of(session, path), data)
