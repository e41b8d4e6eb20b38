"""Catching up: the board's rows brought to what a branch's bundles are now, from what they
were at an earlier commit, at the cost of what changed.

`bundles/` is walked from the top (`bundler.hub.repo.treediff`): a folder whose git tree id is
the same at both commits is skipped whole, so the walk costs two listings per changed folder
on the way down, at any size and at any depth of the layout. In a folder whose files changed,
each bundle is judged by both its files: one whose archive or sidecar differs from what its row
was derived from is downloaded, verified and derived again; one missing its archive or its
sidecar, or failing verification, is left off the board and named; a row whose bundle is gone
is removed. With no commit to start from, every bundle is derived. A bundle found where layout
2 kept it (no shard) is derived too, and its move into its shard planned, unless its shard
holds the bundle already: two copies of one bundle are for a person to sort out.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from bundler.core.errors import HubAccessError, HubError, TemporaryError
from bundler.core.progress import ProgressSink
from bundler.hub.client.remote import RemoteFile
from bundler.hub.client.session import HubSession
from bundler.hub.leaderboard.rows import TableRow, build_row, utc_timestamp
from bundler.hub.leaderboard.tables import AllTasksTable
from bundler.hub.repo.download import fetch_bundle
from bundler.hub.repo.paths import (
    BUNDLES_DIR,
    bundle_of_path,
    repo_paths,
    unsharded_bundle_of,
    unsharded_paths,
)
from bundler.hub.repo.treediff import folder_changes
from bundler.local.layout import TEMP_PREFIX, BundleId
from bundler.local.verify import read_bundle


class Board(Protocol):
    """What catching up reads and updates of a branch's leaderboard."""

    head: str
    leaderboard: AllTasksTable
    left_off: dict[str, str]
    changed_tasks: set[str]
    moves: dict[BundleId, bytes]


@dataclass
class BundleChanges:
    """What changed under `bundles/` between two commits, as far as the board is concerned."""

    derive: dict[BundleId, tuple[RemoteFile, RemoteFile]] = field(default_factory=dict)
    """Bundles to derive again, with their archive and sidecar at the head."""
    sharded: set[BundleId] = field(default_factory=set)
    """Bundles found in their shards, whole or not."""
    unsharded: dict[BundleId, dict[str, RemoteFile]] = field(default_factory=dict)
    """The files of each bundle found where layout 2 kept it, until `settle` judges them."""
    moving: set[BundleId] = field(default_factory=set)
    """Bundles of `derive` found where layout 2 kept them: to move into their shard."""
    removed: set[str] = field(default_factory=set)
    """Rows to take off the board: their bundle is gone, or is left off."""
    left_off: dict[str, str] = field(default_factory=dict)
    examined: list[str] = field(default_factory=list)
    """Folders judged anew: what was left off in them before is replaced by what is now."""

    def judge(
        self,
        folder: str,
        now: dict[str, RemoteFile],
        then: dict[str, RemoteFile],
        board: AllTasksTable,
    ) -> None:
        """Judge the bundles of a folder whose files changed (see the module docstring)."""
        self.examined.append(folder)
        found: dict[BundleId, dict[str, RemoteFile]] = {}
        for path, entry in now.items():
            if (bundle := bundle_of_path(path)) is not None:
                found.setdefault(bundle, {})[path] = entry
            elif (bundle := unsharded_bundle_of(path)) is not None:
                self.unsharded.setdefault(bundle, {})[path] = entry
            # any other file is no bundle's: review names it in a pull request
        self.sharded |= found.keys()
        index = board.indexed(str(bundle) for bundle in found)
        for bundle, files in found.items():
            archive, sidecar = (files.get(path) for path in repo_paths(bundle))
            if archive is None or sidecar is None:
                self._incomplete(bundle, archive, sidecar)
                continue
            row = index.get(str(bundle))
            if (
                row is None
                or row.sidecar_blob_id != sidecar.blob_id
                or row.archive_sha256 != archive.lfs_sha256
            ):
                self.derive[bundle] = (archive, sidecar)
        before = {bundle for bundle in map(bundle_of_path, then) if bundle is not None}
        self.removed |= {str(bundle) for bundle in before - found.keys()}

    def settle(self, board: AllTasksTable) -> None:
        """Layout 2's bundles, once every changed folder is judged: each is derived, to be
        moved into its shard, unless the shard holds that bundle already (found there, or on
        the board and not gone), which a move would overwrite: the copy is then named and left
        where it is. One missing a file is named."""
        index = board.indexed(str(bundle) for bundle in self.unsharded)
        for bundle, files in sorted(self.unsharded.items()):
            archive, sidecar = (files.get(path) for path in unsharded_paths(bundle))
            if bundle in self.sharded or (str(bundle) in index and str(bundle) not in self.removed):
                named = sidecar or archive
                assert named is not None
                self.left_off[named.path] = "a second copy of a bundle its shard holds"
            elif archive is not None and sidecar is not None:
                self.derive[bundle] = (archive, sidecar)
                self.moving.add(bundle)
            else:
                self._incomplete(bundle, archive, sidecar)

    def _incomplete(
        self, bundle: BundleId, archive: RemoteFile | None, sidecar: RemoteFile | None
    ) -> None:
        """A bundle with one of its two files: named, and off the board."""
        named, missing = (sidecar, "archive") if archive is None else (archive, "sidecar")
        assert named is not None
        self.left_off[named.path] = f"its {missing} is missing"
        self.removed.add(str(bundle))

    def forget(self, folder: str, files: dict[str, RemoteFile]) -> None:
        """A folder that is gone: the rows of every bundle it held go too."""
        self.examined.append(folder)
        self.removed |= {str(b) for b in map(bundle_of_path, files) if b is not None}


def find_changes(
    session: HubSession, head: str, since: str | None, board: AllTasksTable
) -> BundleChanges:
    """What changed under `bundles/` from `since` (nothing there when None) to `head`."""
    changes = BundleChanges()
    for change in folder_changes(session, BUNDLES_DIR, head, since):
        if change.gone:
            changes.forget(change.folder, change.then)
        else:
            changes.judge(change.folder, change.now, change.then, board)
    changes.settle(board)
    return changes


def catch_up(session: HubSession, state: Board, since: str | None, progress: ProgressSink) -> None:
    """Bring `state`'s leaderboard and what it leaves off from what they were at `since` to
    what the bundles at its head say."""
    changes = find_changes(session, state.head, since, state.leaderboard)
    if not changes.examined:
        return
    examined = tuple(f"{folder}/" for folder in changes.examined)
    state.left_off = {
        path: why for path, why in state.left_off.items() if not path.startswith(examined)
    }
    state.left_off |= changes.left_off
    sidecars: dict[BundleId, bytes] = {}
    rows = derive_rows(session, state.head, changes.derive, state.left_off, progress, sidecars)
    state.moves |= {bundle: sidecars[bundle] for bundle in changes.moving if bundle in sidecars}
    removed = changes.removed | ({str(b) for b in changes.derive} - {r.bundle_id for r in rows})
    state.leaderboard = state.leaderboard.updated(rows, removed)
    state.changed_tasks |= {b.task for b in changes.derive}
    state.changed_tasks |= {BundleId.parse(bundle).task for bundle in removed}


def derive_rows(
    session: HubSession,
    head: str,
    bundles: dict[BundleId, tuple[RemoteFile, RemoteFile]],
    left_off: dict[str, str],
    progress: ProgressSink,
    sidecars: dict[BundleId, bytes],
) -> list[TableRow]:
    """Download, verify and derive the row of each bundle (its sidecar's bytes kept in
    `sidecars`); one that cannot be read or fails verification is named in `left_off`
    instead. Each row is dated by the commit that last changed its sidecar (its
    publication)."""
    if not bundles:
        return []
    dated = session.entries([sidecar.path for _, sidecar in bundles.values()], head)
    rows: list[TableRow] = []
    staging = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX))
    try:
        for bundle, (archive, sidecar) in sorted(bundles.items()):
            try:
                listed = (archive.path, sidecar.path)
                local = fetch_bundle(session, bundle, head, listed, staging, listed)
            except (TemporaryError, HubAccessError):
                raise
            except HubError as error:
                left_off[sidecar.path] = f"could not be read ({error})"
                continue
            reading = read_bundle(local, progress)
            verification = reading.verification()
            if not verification.ok or reading.sidecar is None or reading.metrics_text is None:
                left_off[sidecar.path] = f"failed verification ({verification.describe_failures()})"
                continue
            sidecars[bundle] = reading.sidecar_data or b""
            entry = dated.get(sidecar.path)
            date = entry.last_commit.date if entry and entry.last_commit else None
            row = build_row(reading.sidecar, reading.metrics_text, utc_timestamp(date))
            rows.append(TableRow(**row.model_dump(), sidecar_blob_id=sidecar.blob_id))
            local.unlink(missing_ok=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return rows
