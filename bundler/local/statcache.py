"""Stat caches in a bundles folder, as git's index is one: what was read is not read again.

Two caches, each one JSON file at the top of the bundles folder, hidden (a dot-name outside the
TEMP_PREFIX pattern, like the lock file), so neither is ever taken for a bundle (`verify`'s
folder walk skips hidden entries) nor removed as a leftover:

- `.bundler.collect.cache`: per run directory (by absolute path), a digest of its listing
  (every entry's name; for each entry that is not a folder its mode, size, mtime_ns, ctime_ns
  and inode), the newest mtime among them, the inputs that shaped its bundle (submitter,
  expected rows, row-count note, allow_partial, level, bundler version), the bundle it became
  (id; archive and sidecar sha256, size, mtime_ns, ctime_ns, inode) and what collect reports
  for it. A run whose listing, inputs and bundle all still match is reported `unchanged`
  without one of its files being opened.
- `.bundler.verify.cache`: per archive that passed verification (by its path in the
  folder), the archive's mode, size, mtime_ns, ctime_ns and inode, the sha256 of its sidecar's
  bytes, and its metrics.json text (which upload's rows need; at most MAX_CACHED_METRICS_BYTES,
  a bundle with more is verified every time). A refused bundle is never cached.

Both are keyed by the bundler version too, and follow git's "racy" rule: an entry whose file
has an mtime not older than the cache file's own mtime may have changed within the
timestamp's granularity after it was recorded, so it is not trusted (a run is read again, an
archive verified again; a bundle's own files are hashed again). A cache is written
atomically (a temporary file beside it, then a rename) and not fsynced: after a crash it is
the old one, the new one, or unreadable, and a cache that cannot be read, parsed or trusted,
or that is larger than MAX_CACHE_BYTES, is simply ignored: everything is read again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

from bundler.core.errors import WriteError
from bundler.core.limits import MAX_CACHE_BYTES
from bundler.core.version import bundler_version
from bundler.local.fileio import StagedFile, signals_held
from bundler.local.layout import CACHE_NAMES, COLLECT_CACHE_NAME, TEMP_PREFIX, VERIFY_CACHE_NAME

CACHE_FORMAT = 1
MAX_CACHED_METRICS_BYTES = 64 << 10
"""metrics.json texts up to this size are kept in the verification cache (real ones are a few
hundred bytes; the format allows 1 MiB, which 2,000 bundles could not keep under the cap)."""

assert not any(name.startswith(TEMP_PREFIX) for name in CACHE_NAMES), "a cache is no leftover"
__all__ = ["COLLECT_CACHE_NAME", "VERIFY_CACHE_NAME", "StatCache", "stat_key"]


def stat_key(status: os.stat_result) -> list[int]:
    """What a file's identity is taken to be: mode, size, mtime_ns, ctime_ns and inode. A
    content change that keeps size and mtime (os.utime) still changes the ctime."""
    return [
        status.st_mode,
        status.st_size,
        status.st_mtime_ns,
        status.st_ctime_ns,
        status.st_ino,
    ]


class StatCache:
    """One cache file: entries by key, loaded bounded and ignored when unusable."""

    def __init__(self, path: Path, kind: str, *, ignore: bool = False) -> None:
        self.path = path
        self.kind = kind
        self.loaded: dict[str, Any] = {}
        self.written_ns = 0
        """The cache file's own mtime: an entry recorded at or after it is racy."""
        self.entries: dict[str, Any] = {}
        """What the next save writes."""
        self.dirty = False
        if not ignore:
            self._load()

    def _load(self) -> None:
        try:
            descriptor = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return
        try:
            status = os.fstat(descriptor)
            if not stat.S_ISREG(status.st_mode) or status.st_size > MAX_CACHE_BYTES:
                return
            chunks: list[bytes] = []
            total = 0
            while chunk := os.read(descriptor, min(1 << 20, MAX_CACHE_BYTES + 1 - total)):
                chunks.append(chunk)
                total += len(chunk)
                if total > MAX_CACHE_BYTES:
                    return
            document = json.loads(b"".join(chunks))
        except (OSError, ValueError, RecursionError):
            return
        finally:
            os.close(descriptor)
        if (
            isinstance(document, dict)
            and document.get("format") == CACHE_FORMAT
            and document.get("kind") == self.kind
            and document.get("bundler_version") == bundler_version()
            and isinstance(document.get("entries"), dict)
        ):
            self.loaded = document["entries"]
            self.written_ns = status.st_mtime_ns

    def is_racy(self, mtime_ns: object) -> bool:
        """Whether a file with this mtime may have changed unseen after it was recorded."""
        return not isinstance(mtime_ns, int) or mtime_ns >= self.written_ns

    def keep(self, key: str, entry: Any) -> None:
        """Carry `entry` into the next save."""
        if self.loaded.get(key) != entry:
            self.dirty = True
        self.entries[key] = entry

    def save(self) -> None:
        """Write the entries kept, when they differ from the loaded ones (or some were racy:
        `dirty`); atomically; quietly not at all when the folder cannot be written or the cache
        would be larger than MAX_CACHE_BYTES (then the old one is removed)."""
        if not self.dirty and self.entries.keys() == self.loaded.keys():
            return
        document = {
            "format": CACHE_FORMAT,
            "kind": self.kind,
            "bundler_version": bundler_version(),
            "entries": self.entries,
        }
        data = json.dumps(document, separators=(",", ":"), ensure_ascii=True).encode("ascii")
        with contextlib.suppress(OSError, WriteError):
            if len(data) > MAX_CACHE_BYTES:
                self.path.unlink(missing_ok=True)
                return
            with StagedFile(self.path) as staged:
                staged.handle.write(data)
                staged.handle.flush()
                os.fchmod(staged.handle.fileno(), 0o644)
                with signals_held():
                    os.replace(staged.path, self.path)
                    staged.committed = True


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
