"""collect's stat cache: a run whose files, inputs and bundle are unchanged is not read again.

See bundler.local.statcache for the file and its rules. Here: what an entry holds, when it
still describes a run (`lookup`, before any file of the run is opened; collect compares the
inputs its options give with the recorded ones; `still_bundled` under the folder's lock, for
the bundle it became), and recording a run just bundled (`record`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bundler.local.discover import Listing, RunDirectory
from bundler.local.fileio import sha256_file
from bundler.local.layout import BundleId, LayoutError
from bundler.local.statcache import COLLECT_CACHE_NAME, StatCache, stat_key


@dataclass(frozen=True)
class CachedBundle:
    """What collect reports for a run it bundled before (as `unchanged`)."""

    archive: str
    sidecar: str
    sha256: str
    size: int
    coverage: str
    predictions: int
    warnings: list[str]


@dataclass
class CachedRun:
    """A run whose directory is exactly as it was when it was bundled."""

    run: RunDirectory
    key: str
    entry: dict[str, Any]
    bundle_id: BundleId
    task: str
    names: set[str]


class CollectCache:
    def __init__(self, bundles_dir: Path, *, full: bool) -> None:
        self.bundles_dir = bundles_dir
        self._top = os.fspath(bundles_dir)  # as a string once: joined for every unchanged run
        self.file = StatCache(bundles_dir / COLLECT_CACHE_NAME, "collect", ignore=full)

    @staticmethod
    def key(run: RunDirectory) -> str:
        return os.path.abspath(run.path)

    def holds(self, directory: str) -> bool:
        """Whether an entry is kept for the run directory at `directory`: only then does its
        discovery take the listing `lookup` compares (every file stat'ed); a run new to the
        bundles folder has it taken as it is read (bundler.local.discover.ListingParts)."""
        return os.path.abspath(directory) in self.file.loaded

    def lookup(self, run: RunDirectory) -> CachedRun | None:
        """The cached run, if its listing (every file's stat, taken by discovery before
        anything was read) is as recorded and not racy; else None, and the run is read."""
        listing, key = run.listing, self.key(run)
        entry = self.file.loaded.get(key)
        if listing is None or not isinstance(entry, dict):
            return None
        try:
            if entry["listing"] != listing.digest or entry["left_out"] != list(
                run.left_out_folders
            ):
                return None
            if self.file.is_racy(listing.newest_mtime_ns):
                self.file.dirty = True  # written again, later than the file: then trusted
                return None
            bundle_id = BundleId.parse(entry["bundle_id"])
            task, names = entry["task"], set(entry["names"])
        except (KeyError, TypeError, LayoutError):
            return None
        if not isinstance(task, str) or not all(isinstance(name, str) for name in names):
            return None
        return CachedRun(run, key, entry, bundle_id, task, names)

    def still_bundled(self, cached: CachedRun) -> CachedBundle | None:
        """What collect reports for the run, if its archive and sidecar are still the ones it
        wrote; a racy one is hashed again. Call with the folder locked."""
        entry = cached.entry
        bundle_id = cached.bundle_id  # paths as strings: this runs for every unchanged run
        folder = os.path.join(self._top, bundle_id.player_dir)  # a name: no separator in it
        archive = f"{folder}{os.sep}{bundle_id.archive_name}"
        sidecar = f"{folder}{os.sep}{bundle_id.sidecar_name}"
        if os.path.islink(folder):
            return None  # read again, so that collect refuses to write through the link
        try:
            for path, name in ((archive, "archive"), (sidecar, "sidecar")):
                recorded = entry[name]
                status = os.stat(path, follow_symlinks=False)
                if stat_key(status) != recorded["stat"]:
                    return None
                if self.file.is_racy(status.st_mtime_ns):
                    if sha256_file(Path(path))[0] != recorded["sha256"]:
                        return None
                    self.file.dirty = True
            report = entry["report"]
            bundle = CachedBundle(
                archive=archive,
                sidecar=sidecar,
                sha256=entry["archive"]["sha256"],
                size=entry["archive"]["stat"][1],
                coverage=report["coverage"],
                predictions=report["predictions"],
                warnings=report["warnings"],
            )
        except (OSError, KeyError, TypeError, IndexError, ValueError):
            return None
        if not (
            isinstance(bundle.sha256, str)
            and isinstance(bundle.size, int)
            and isinstance(bundle.coverage, str)
            and isinstance(bundle.predictions, int)
            and isinstance(bundle.warnings, list)
            and all(isinstance(warning, str) for warning in bundle.warnings)
        ):
            return None
        self.file.keep(cached.key, entry)
        return bundle

    def carry(self, run: RunDirectory) -> None:
        """Keep the entry of a run found but not bundled this time (not selected)."""
        key = self.key(run)
        entry = self.file.loaded.get(key)
        if entry is not None:
            self.file.keep(key, entry)

    def record(
        self,
        run: RunDirectory,
        listing: Listing | None,
        *,
        bundle_id: str,
        bundle: CachedBundle,
        task: str,
        names: set[str],
        statics: dict[str, Any],
        inputs: dict[str, Any],
        sidecar_sha256: str,
    ) -> None:
        """Remember a run just bundled, with its `listing`: its files as stat'ed before they
        were read (by discovery, or as they were read); none, nothing is remembered."""
        if listing is None:
            return
        try:
            archive = stat_key(os.stat(bundle.archive, follow_symlinks=False))
            sidecar = stat_key(os.stat(bundle.sidecar, follow_symlinks=False))
        except OSError:
            return
        self.file.keep(
            self.key(run),
            {
                "listing": listing.digest,
                "left_out": list(run.left_out_folders),
                "bundle_id": bundle_id,
                "task": task,
                "names": sorted(names),
                "statics": statics,
                "inputs": inputs,
                "archive": {"stat": archive, "sha256": bundle.sha256},
                "sidecar": {"stat": sidecar, "sha256": sidecar_sha256},
                "report": {
                    "coverage": bundle.coverage,
                    "predictions": bundle.predictions,
                    "warnings": bundle.warnings,
                },
            },
        )

    def keep_apart(self) -> None:
        """In a forked child (bundler.local.bundling.bundle_all): from now on keep only what
        this process records, for `kept_apart` to hand to the parent."""
        self.file.entries = {}

    def kept_apart(self) -> dict[str, Any]:
        return self.file.entries

    def adopt(self, entries: dict[str, Any]) -> None:
        """Keep the entries a child recorded (`kept_apart`), as if recorded here."""
        for key, entry in entries.items():
            self.file.keep(key, entry)

    def save(self) -> None:
        self.file.save()
