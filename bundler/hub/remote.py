"""What the Hub holds at a path, as plain values: the planner compares local bundles with these
without loading the Hub client (`bundler.hub.session` builds them from its answers)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass


@dataclass(frozen=True)
class RemoteFile:
    """What the Hub holds at a path: its git blob id and, for LFS files, the sha256."""

    path: str
    size: int
    blob_id: str
    lfs_sha256: str | None


def git_blob_id(data: bytes) -> str:
    """The id git (and the Hub) gives a regular file's content."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()
