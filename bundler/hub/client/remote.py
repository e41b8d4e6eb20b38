"""What the Hub holds at a path, as plain values: the planner compares local bundles with these
without loading the Hub client (`bundler.hub.client.session` builds them from its answers)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class RemoteFile:
    """What the Hub holds at a path: its git blob id and, for LFS files, the sha256."""

    path: str
    size: int
    blob_id: str
    lfs_sha256: str | None
    last_commit: LastCommit | None = None
    """Only from an expanded listing: the last commit that changed the file."""

    @property
    def identity(self) -> str:
        """What the content is: its sha256 (LFS) or its git blob id (a regular file)."""
        return self.lfs_sha256 or self.blob_id


@dataclass(frozen=True)
class LastCommit:
    oid: str
    date: datetime
    title: str = ""
    """As the Hub titles it: one that merged a pull request ends `(#N)`."""


@dataclass(frozen=True)
class CommitAuthors:
    """Who the Hub says made a commit (`authors`: Hub user names), and its title."""

    authors: tuple[str, ...]
    title: str


@dataclass(frozen=True)
class RemoteFolder:
    """A folder on the Hub: its git tree id changes exactly when something below it does."""

    path: str
    tree_id: str
    last_commit: LastCommit | None = None


RemoteEntry = RemoteFile | RemoteFolder


def git_blob_id(data: bytes) -> str:
    """The id git (and the Hub) gives a regular file's content."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def holds_bytes(remote: RemoteFile | None, data: bytes) -> bool:
    """Whether the Hub's file at a path already holds exactly `data`: by sha256 for an LFS
    file, by git blob id for a regular one."""
    if remote is None:
        return False
    if remote.lfs_sha256 is not None:
        return remote.lfs_sha256 == hashlib.sha256(data).hexdigest()
    return remote.blob_id == git_blob_id(data)
