"""Stage 1: find run directories under an output root, without following any link.

A model name may contain "/", so a run directory can sit at any depth below
`<task>_predictions/`. Everything that is not a run is reported (skipped, or refused when it is
a link), so the user sees what the bundler did not take and why.
"""

from __future__ import annotations

import hashlib
import os
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ConfigDict

from bundler.core.errors import UsageError
from bundler.core.model import Model

PREDICTIONS_SUFFIX = "_predictions"
HOW_DO_YOU_DIR = "how_do_you"
RUN_META_NAME = "run_meta.json"
METRICS_NAME = "metrics.json"
PREDICTION_FILE = re.compile(r"prediction_(.*)\.json")
"""Always `fullmatch`ed: `$` would also match before a trailing newline, and a file named
"prediction_2.json\n" would pass for row 2."""
RUN_INFO_FILES = (RUN_META_NAME, METRICS_NAME)
"""The files of a run other than its predictions."""


class Listing(Model):
    """What a run directory held when it was discovered, for collect's stat cache
    (bundler.local.collectcache), as git's index holds it: a digest of every entry's name and,
    for each entry that is not a folder, its mode, size, mtime_ns, ctime_ns and inode (a
    content change that keeps size and mtime still changes the ctime). Folders count by name
    only: a folder below a run is a run of its own or left out by name. Taken in the walk's
    own pass, before any file of the run is opened."""

    model_config = ConfigDict(frozen=True)

    digest: str
    newest_mtime_ns: int
    """The newest mtime among the entries: the cache does not trust a listing as new as
    itself (git's racy rule)."""

    @classmethod
    def of(cls, parts: list[bytes], newest: int) -> Listing:
        """From each entry's `listing_part`, in any order."""
        parts.sort()
        return cls(
            digest=hashlib.blake2b(b"".join(parts), digest_size=16).hexdigest(),
            newest_mtime_ns=newest,
        )


_IDENTITY = struct.Struct("<5q")
_FOLDER = _IDENTITY.pack(-1, 0, 0, 0, 0)


def listing_part(name: str, status: os.stat_result | None) -> bytes:
    """One entry of a Listing: its name, a NUL (no name holds one, so the parts of a listing
    read back one way only), then its mode, size, mtime_ns, ctime_ns and inode, or -1 and
    zeros for a folder. Packed bytes, about 100 a file: a run directory of 100,000 predictions
    holds them all while it is walked."""
    identity = (
        _FOLDER
        if status is None
        else _IDENTITY.pack(
            status.st_mode, status.st_size, status.st_mtime_ns, status.st_ctime_ns, status.st_ino
        )
    )
    return name.encode("utf-8", "surrogateescape") + b"\0" + identity


class RunDirectory(Model):
    """A directory that holds run_meta.json, metrics.json or prediction files."""

    model_config = ConfigDict(frozen=True)

    path: Path
    relative: str
    task_dir_name: str
    """The task as the directory names it; only a fallback for filters, never the truth."""
    predictions: int = 0
    """How many prediction files the directory lists: the total a progress bar counts to,
    known before the run is read."""
    left_out_folders: tuple[str, ...] = ()
    """Its subfolders, by name, that are no run directory and lead to none: nothing below them
    is bundled, so the run lists them among what it left out. The others are runs of their
    own (a model name may contain "/")."""
    listing: Listing | None = None
    """None when an entry could not be stat'ed: then the run is read."""


class Skipped(Model):
    model_config = ConfigDict(frozen=True)

    path: str
    reason: str


class Discovery(Model):
    model_config = ConfigDict(frozen=True)

    runs: list[RunDirectory]
    skipped: list[Skipped]
    refused: list[Skipped]


def is_run_file(name: str) -> bool:
    return name in RUN_INFO_FILES or PREDICTION_FILE.fullmatch(name) is not None


def _sorted_entries(directory: Path) -> list[os.DirEntry[str]]:
    """Entries in name order, so nothing depends on the file system's listing order."""
    with os.scandir(directory) as entries:
        return sorted(entries, key=lambda entry: entry.name)


def discover(output_root: Path) -> Discovery:
    """List the run directories below `output_root`, plus what was skipped or refused."""
    if not output_root.exists():
        raise UsageError(
            f"{output_root}: output root does not exist",
            hint="name the folder the harness wrote",
            remedy="name-output-root",
        )
    if output_root.is_symlink() or not output_root.is_dir():
        raise UsageError(f"{output_root}: output root is not a directory")
    _refuse_predictions_folder(output_root)
    runs: list[RunDirectory] = []
    skipped: list[Skipped] = []
    refused: list[Skipped] = []
    try:
        top = _sorted_entries(output_root)
    except OSError as error:
        raise UsageError(f"{output_root}: cannot list: {error.strerror}") from None
    for entry in top:
        shown = str(Path(output_root, entry.name))
        if entry.is_symlink():
            refused.append(Skipped(path=shown, reason="symbolic link; links are never followed"))
        elif not entry.is_dir(follow_symlinks=False):
            skipped.append(Skipped(path=shown, reason="not a statics output directory"))
        elif entry.name == HOW_DO_YOU_DIR:
            skipped.append(Skipped(path=shown, reason="not a dataset-backed target"))
        elif not entry.name.endswith(PREDICTIONS_SUFFIX):
            skipped.append(Skipped(path=shown, reason="not a <task>_predictions directory"))
        else:
            task = entry.name.removesuffix(PREDICTIONS_SUFFIX)
            _walk(Path(entry.path), output_root, task, runs, skipped, refused)
    return Discovery(runs=runs, skipped=skipped, refused=refused)


def _refuse_predictions_folder(output_root: Path) -> None:
    """A `<task>_predictions` folder given as the output root is one task's runs, not the root:
    refused, naming the folder to give instead (its parent)."""
    name = output_root.resolve().name
    if name.endswith(PREDICTIONS_SUFFIX) and name != PREDICTIONS_SUFFIX:
        parent = output_root.resolve().parent
        raise UsageError(
            f"{output_root}: a {name} folder, not an output root (which holds "
            "<task>_predictions/ folders)",
            hint=f"give its parent: {parent}",
        )


@dataclass
class _Scanned:
    """What a walk of some folders found, in walk order: the run directories (with their
    prediction count, subfolders and listing), the folders that are no run (with their
    files) and what was refused."""

    found: list[tuple[str, int, list[str], Listing | None]] = field(default_factory=list)
    elsewhere: list[tuple[str, list[str]]] = field(default_factory=list)
    refused: list[Skipped] = field(default_factory=list)


def _scan(pending: list[str]) -> _Scanned:
    """Walk the folders of `pending` (a stack: the last is walked first) and all below them."""
    scanned = _Scanned()
    while pending:
        directory = pending.pop()
        try:
            with os.scandir(directory) as scan:
                entries = list(scan)
        except OSError as error:
            scanned.refused.append(Skipped(path=directory, reason=f"cannot list: {error.strerror}"))
            continue
        # One pass in listing order (a run directory can hold 100,000 files; sorting them all
        # cost more than the pass); only what is reported or walked further is put in order.
        predictions = 0
        holds_run_file = False
        subdirectories: list[str] = []
        linked_directories: list[str] = []
        files: list[str] = []
        # The stat cache's listing, in the same pass (see Listing): a folder by name, any
        # other entry (a link too) by its lstat; None when one cannot be stat'ed.
        parts: list[bytes] | None = []
        newest = 0
        entries.reverse()
        while entries:  # each entry let go once seen: it keeps its lstat result while it lives
            entry = entries.pop()
            name = entry.name
            run_file = name in RUN_INFO_FILES
            if not run_file and PREDICTION_FILE.fullmatch(name) is not None:
                run_file = True
                predictions += 1
            holds_run_file = holds_run_file or run_file
            if entry.is_dir(follow_symlinks=False):  # a folder, not a link to one
                subdirectories.append(entry.path)
                if parts is not None:
                    parts.append(listing_part(name, None))
                continue
            if parts is not None:
                try:
                    status = entry.stat(follow_symlinks=False)
                except OSError:
                    parts = None
                else:
                    parts.append(listing_part(name, status))
                    newest = max(newest, status.st_mtime_ns)
            # Links to run files are refused with their run; other links would be skipped
            # silently as "extra files", so a linked directory is called out here.
            if entry.is_symlink() and not run_file and entry.is_dir():
                linked_directories.append(entry.path)
                continue
            if not holds_run_file:
                files.append(entry.path)  # only until a run file shows the folder is a run
        if holds_run_file:
            listing = None if parts is None else Listing.of(parts, newest)
            scanned.found.append((directory, predictions, subdirectories, listing))
        else:
            scanned.elsewhere.append((directory, files))
        scanned.refused.extend(
            Skipped(path=path, reason="symbolic link; links are never followed")
            for path in sorted(linked_directories)
        )
        pending.extend(sorted(subdirectories, reverse=True))
    return scanned


def _walk(
    top: Path,
    output_root: Path,
    task: str,
    runs: list[RunDirectory],
    skipped: list[Skipped],
    refused: list[Skipped],
) -> None:
    """Every run directory below `top`, depth first in name order, with an explicit stack: a
    tree thousands of folders deep is walked like any other, never overflowing the call stack.
    Which folders lead to no run is known once the whole tree has been walked: a run's own
    such subfolders are left out with the run; outside a run, each file in a folder on the
    way to a run, and each topmost folder that leads to none, is reported skipped. Paths are
    strings until a run is reported: a nightly tree has tens of thousands of entries, and
    this walk is most of what a collect with nothing new does."""
    top_path = str(top)
    scanned = _scan([top_path])
    found, elsewhere = scanned.found, scanned.elsewhere
    refused.extend(scanned.refused)
    leading_to_runs: set[str] = {top_path}
    for directory, _, _, _ in found:
        while directory != top_path and directory not in leading_to_runs:
            leading_to_runs.add(directory)
            directory = os.path.dirname(directory)
    run_directories = {directory for directory, _, _, _ in found}
    for directory, files in elsewhere:
        parent = os.path.dirname(directory)
        if directory in leading_to_runs:
            skipped.extend(
                Skipped(path=path, reason="not in a run directory; never bundled")
                for path in sorted(files)
            )
        elif parent in leading_to_runs and parent not in run_directories:
            skipped.append(Skipped(path=directory, reason="holds no run; never bundled"))
    for directory, predictions, subdirectories, listing in found:
        path = Path(directory)
        left_out = [sub for sub in subdirectories if sub not in leading_to_runs]
        runs.append(
            RunDirectory(
                path=path,
                relative=path.relative_to(output_root).as_posix(),
                task_dir_name=task,
                predictions=predictions,
                left_out_folders=tuple(sorted(os.path.basename(sub) for sub in left_out)),
                listing=listing,
            )
        )
