"""Catching up: the board's rows brought to what a branch's bundles are now, from what they
were at an earlier commit, at the cost of what changed.

`bundles/` is walked from the top (`bundler.hub.repo.treediff`): a folder whose git tree id is
the same at both commits is skipped whole, so the walk costs two listings per changed folder
on the way down, at any size and at any depth of the layout. In a folder whose files changed,
each bundle is judged by both its files, against what the folder held at the earlier commit
(whose bundles the board was derived from): one new, or whose archive or sidecar changed, or
that was left off the board, is downloaded, verified and derived again; one missing its archive
or its sidecar, or failing verification, is left off the board and named; a row whose bundle is
gone is removed. So the board's rows are read only where a bundle changed or went: bundles that
are only new add their rows to the table's last part. With no commit to start from, every
bundle is derived. A bundle found where layout 2 kept it (no shard) is derived too, and its
move into its shard planned, unless its shard holds the bundle already: two copies of one
bundle are for a person to sort out.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
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


class Board(Protocol):
    """What catching up reads and updates of a branch's leaderboard."""

    head: str
    leaderboard: AllTasksTable
    left_off: dict[str, str]
    changed_tasks: set[str]
    moves: dict[BundleId, bytes]

    def appended(self, rows: Sequence[TableRow]) -> AllTasksTable: ...


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
    replaced: set[BundleId] = field(default_factory=set)
    """Bundles of `derive` that were there before: the board may hold a row of theirs."""
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
        left_off: dict[str, str],
    ) -> None:
        """Judge the bundles of a folder whose files changed (see the module docstring);
        `left_off` is what the board left off before."""
        self.examined.append(folder)
        found: dict[BundleId, dict[str, RemoteFile]] = {}
        for path, entry in now.items():
            if (bundle := bundle_of_path(path)) is not None:
                found.setdefault(bundle, {})[path] = entry
            elif (bundle := unsharded_bundle_of(path)) is not None:
                self.unsharded.setdefault(bundle, {})[path] = entry
            # any other file is no bundle's: review names it in a pull request
        self.sharded |= found.keys()
        before = {bundle for bundle in map(bundle_of_path, then) if bundle is not None}
        for bundle, files in found.items():
            paths = repo_paths(bundle)
            archive, sidecar = (files.get(path) for path in paths)
            if archive is None or sidecar is None:
                self._incomplete(bundle, archive, sidecar, had_row=bundle in before)
                continue
            held = [then.get(path) for path in paths]
            same = all(
                was is not None and was.identity == is_.identity
                for was, is_ in zip(held, (archive, sidecar), strict=True)
            )
            if same and not any(path in left_off for path in paths):
                continue  # its row is as it was derived
            self.derive[bundle] = (archive, sidecar)
            if bundle in before:
                self.replaced.add(bundle)
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
                self.replaced.add(bundle)
            else:
                self._incomplete(bundle, archive, sidecar, had_row=True)

    def _incomplete(
        self,
        bundle: BundleId,
        archive: RemoteFile | None,
        sidecar: RemoteFile | None,
        *,
        had_row: bool,
    ) -> None:
        """A bundle with one of its two files: named, and off the board (its row removed,
        where it may have had one)."""
        named, missing = (sidecar, "archive") if archive is None else (archive, "sidecar")
        assert named is not None
        self.left_off[named.path] = f"its {missing} is missing"
        if had_row:
            self.removed.add(str(bundle))

    def forget(self, folder: str, files: dict[str, RemoteFile]) -> None:
        """A folder that is gone: the rows of every bundle it held go too."""
        self.examined.append(folder)
        self.removed |= {str(b) for b in map(bundle_of_path, files) if b is not None}


def find_changes(session: HubSession, head: str, since: str | None, state: Board) -> BundleChanges:
    """What changed under `bundles/` from `since` (nothing there when None) to `head`."""
    changes = BundleChanges()
    for change in folder_changes(session, BUNDLES_DIR, head, since):
        if change.gone:
            changes.forget(change.folder, change.then)
        else:
            changes.judge(change.folder, change.now, change.then, state.left_off)
    if changes.unsharded:
        changes.settle(state.leaderboard)
    return changes


def catch_up(session: HubSession, state: Board, since: str | None, progress: ProgressSink) -> None:
    """Bring `state`'s leaderboard and what it leaves off from what they were at `since` to
    what the bundles at its head say."""
    changes = find_changes(session, state.head, since, state)
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
    replaced = {str(bundle) for bundle in changes.replaced}
    removed = changes.removed | (replaced - {row.bundle_id for row in rows})
    if removed or any(row.bundle_id in replaced for row in rows):
        state.leaderboard = state.leaderboard.updated(rows, removed)
    else:  # bundles only added: their rows go into the last part, no other is read
        state.leaderboard = state.appended(rows)
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
    publication). Verifying loads here, when a bundle is to be read, not with every upload
    that imports this module (docs/performance.md)."""
    if not bundles:
        return []
    from bundler.local.verify import read_bundle

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
