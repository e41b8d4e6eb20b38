"""upload's verification cache: an archive unchanged since this bundler version verified it is
not verified again (bundler.local.statcache has the file and its rules).

An entry is made only for a bundle that passed, keyed by its path in the bundles folder, and
holds the archive's mode, size, mtime_ns, ctime_ns and inode (stat'ed before it was read), the
sha256 of its sidecar's bytes, the sidecar's facts that planning needs of every bundle
(SidecarFacts), and its metrics.json text: upload builds each bundle's table row from the
sidecar and that text, and reading the text again would mean decompressing the archive. The
sidecar itself is read every time (it is small, and its bytes are what upload publishes) and
must hash to the recorded digest; it is parsed only when upload needs more than its facts
(a bundle it publishes): validating 2,000 sidecars took most of a no-op upload's local part.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from functools import cached_property
from pathlib import Path

from pydantic import ValidationError

from bundler.core.errors import InputError
from bundler.core.limits import MAX_SIDECAR_BYTES
from bundler.local.fileio import read_bounded
from bundler.local.layout import VERIFY_CACHE_NAME, sidecar_path_of
from bundler.local.manifest import Sidecar
from bundler.local.schema import StaticsIdentity
from bundler.local.statcache import MAX_CACHED_METRICS_BYTES, StatCache, sha256_bytes, stat_key


@dataclass(frozen=True)
class SidecarFacts:
    """What planning an upload asks of every bundle, published or not: which bundle it is,
    which archive, how complete, and what it measured (the task definitions are checked
    against it). Plain values, recorded in the cache as they are: an unchanged bundle's facts
    are read back with a few type checks, not a model's validation."""

    bundle_id: str
    archive_sha256: str
    archive_size: int
    coverage_status: str
    rows_present: int
    expected_rows: int | None
    statics: dict[str, object]
    """The sidecar's `statics`, as recorded; `VerifiedBundle.statics` validates it."""

    @classmethod
    def of(cls, sidecar: Sidecar) -> SidecarFacts:
        archive, coverage = sidecar.archive, sidecar.coverage
        return cls(
            sidecar.bundle_id,
            archive.sha256,
            archive.size,
            coverage.status,
            coverage.rows_present,
            coverage.expected_rows,
            sidecar.statics.model_dump(mode="json"),
        )

    def recorded(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_recorded(cls, entry: object) -> SidecarFacts | None:
        """The facts as an entry recorded them; None when they are not all there, typed."""
        if not isinstance(entry, dict) or entry.keys() != cls.__dataclass_fields__.keys():
            return None
        facts = cls(**entry)
        typed = (
            isinstance(facts.bundle_id, str)
            and isinstance(facts.archive_sha256, str)
            and isinstance(facts.coverage_status, str)
            and isinstance(facts.statics, dict)
            and all(
                type(number) is int
                for number in (facts.archive_size, facts.rows_present, facts.expected_rows or 0)
            )
        )
        return facts if typed else None


@dataclass
class VerifiedBundle:
    """What upload needs of a bundle that passed verification: the sidecar's bytes and facts,
    the metrics text, and the sidecar itself, parsed when first asked for. Its bytes are the
    ones that passed (verified now, or hashing to the cache's digest), so parsing them cannot
    fail but for a cache written by hand."""

    sidecar_data: bytes
    metrics_text: str
    facts: SidecarFacts
    parsed: Sidecar | None = None

    @classmethod
    def of(cls, sidecar: Sidecar, sidecar_data: bytes, metrics_text: str) -> VerifiedBundle:
        """A bundle just verified: its sidecar parsed already, its facts taken from it."""
        return cls(sidecar_data, metrics_text, SidecarFacts.of(sidecar), parsed=sidecar)

    @property
    def sidecar(self) -> Sidecar:
        if self.parsed is None:
            self.parsed = Sidecar.model_validate_json(self.sidecar_data)
        return self.parsed

    @cached_property
    def statics(self) -> StaticsIdentity:
        """What the bundle measured: from its facts, or (facts a hand-edited cache spoiled)
        from the sidecar itself."""
        try:
            return StaticsIdentity.model_validate(self.facts.statics)
        except ValidationError:
            return self.sidecar.statics


class VerifyCache:
    def __init__(self, bundles_dir: Path) -> None:
        self.bundles_dir = bundles_dir
        self._prefix = f"{bundles_dir}{os.sep}"
        self.file = StatCache(bundles_dir / VERIFY_CACHE_NAME, "verify")

    def _key(self, archive: Path | str) -> str:
        """The archive's path in the folder (as relative_to would give it, as a string: this
        runs twice for every bundle of every upload); an absolute path for one outside it."""
        shown, prefix = str(archive), self._prefix
        if shown.startswith(prefix):
            return shown[len(prefix) :]
        return os.path.abspath(archive)

    def stat(self, archive: Path | str) -> list[int] | None:
        """The archive's identity now: taken before it is read, and kept with its verdict."""
        try:
            return stat_key(os.stat(archive, follow_symlinks=False))
        except OSError:
            return None

    def lookup(self, archive: Path | str, identity: list[int] | None) -> VerifiedBundle | None:
        """The bundle as verified before, if its archive is unchanged (and not racy) and its
        sidecar holds the same bytes; else None, and it is verified."""
        entry = self.file.loaded.get(self._key(archive))
        if identity is None or not isinstance(entry, dict) or entry.get("archive") != identity:
            return None
        if self.file.is_racy(identity[2]):
            self.file.dirty = True
            return None
        metrics_text = entry.get("metrics_text")
        facts = SidecarFacts.from_recorded(entry.get("sidecar"))
        if not isinstance(metrics_text, str) or facts is None:
            return None
        try:
            data = read_bounded(sidecar_path_of(os.fspath(archive)), MAX_SIDECAR_BYTES)
        except InputError:
            return None
        if sha256_bytes(data) != entry.get("sidecar_sha256"):
            return None
        self.file.keep(self._key(archive), entry)
        return VerifiedBundle(data, metrics_text, facts)

    def record(
        self, archive: Path | str, identity: list[int] | None, bundle: VerifiedBundle
    ) -> None:
        """Remember a bundle that just passed verification."""
        if identity is None or len(bundle.metrics_text.encode("utf-8")) > MAX_CACHED_METRICS_BYTES:
            return
        self.file.keep(
            self._key(archive),
            {
                "archive": identity,
                "sidecar_sha256": sha256_bytes(bundle.sidecar_data),
                "sidecar": bundle.facts.recorded(),
                "metrics_text": bundle.metrics_text,
            },
        )

    def save(self) -> None:
        self.file.save()
