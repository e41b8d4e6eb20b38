"""upload's verification cache: an archive unchanged since this bundler version verified it is
not verified again (bundler.local.statcache has the file and its rules).

An entry is made only for a bundle that passed, keyed by its path in the bundles folder, and
holds the archive's mode, size, mtime_ns, ctime_ns and inode (stat'ed before it was read), the
sha256 of its sidecar's bytes, and its metrics.json text: upload builds each bundle's table
row from the sidecar and that text, and reading the text again would mean decompressing the
archive. The sidecar itself is read every time (it is small, and its bytes are what upload
publishes) and must hash to the recorded digest.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from bundler.core.errors import InputError
from bundler.core.limits import MAX_SIDECAR_BYTES
from bundler.local.fileio import read_bounded
from bundler.local.layout import VERIFY_CACHE_NAME, sidecar_of
from bundler.local.manifest import Sidecar
from bundler.local.statcache import MAX_CACHED_METRICS_BYTES, StatCache, sha256_bytes, stat_key


@dataclass(frozen=True)
class VerifiedBundle:
    """What upload needs of a bundle that passed verification."""

    sidecar: Sidecar
    sidecar_data: bytes
    metrics_text: str


class VerifyCache:
    def __init__(self, bundles_dir: Path) -> None:
        self.bundles_dir = bundles_dir
        self.file = StatCache(bundles_dir / VERIFY_CACHE_NAME, "verify")

    def _key(self, archive: Path) -> str:
        try:
            return archive.relative_to(self.bundles_dir).as_posix()
        except ValueError:
            return os.path.abspath(archive)

    def stat(self, archive: Path) -> list[int] | None:
        """The archive's identity now: taken before it is read, and kept with its verdict."""
        try:
            return stat_key(os.stat(archive, follow_symlinks=False))
        except OSError:
            return None

    def lookup(self, archive: Path, identity: list[int] | None) -> VerifiedBundle | None:
        """The bundle as verified before, if its archive is unchanged (and not racy) and its
        sidecar holds the same bytes; else None, and it is verified."""
        entry = self.file.loaded.get(self._key(archive))
        if identity is None or not isinstance(entry, dict) or entry.get("archive") != identity:
            return None
        if self.file.is_racy(identity[2]):
            self.file.dirty = True
            return None
        metrics_text = entry.get("metrics_text")
        if not isinstance(metrics_text, str):
            return None
        try:
            data = read_bounded(sidecar_of(archive), MAX_SIDECAR_BYTES)
            if sha256_bytes(data) != entry.get("sidecar_sha256"):
                return None
            sidecar = Sidecar.model_validate_json(data)
        except (InputError, ValidationError):
            return None
        self.file.keep(self._key(archive), entry)
        return VerifiedBundle(sidecar, data, metrics_text)

    def record(self, archive: Path, identity: list[int] | None, bundle: VerifiedBundle) -> None:
        """Remember a bundle that just passed verification."""
        if identity is None or len(bundle.metrics_text.encode("utf-8")) > MAX_CACHED_METRICS_BYTES:
            return
        self.file.keep(
            self._key(archive),
            {
                "archive": identity,
                "sidecar_sha256": sha256_bytes(bundle.sidecar_data),
                "metrics_text": bundle.metrics_text,
            },
        )

    def save(self) -> None:
        self.file.save()
