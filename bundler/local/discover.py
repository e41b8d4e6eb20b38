"""Stage 1: find run directories under an output root, without following any link.

A model name may contain "/", so a run directory can sit at any depth below
`<task>_predictions/`. Everything that is not a run is reported (skipped, or refused when it is
a link), so the user sees what the bundler did not take and why.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
import struct
from collections.abc import Callable
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
    only: a folder below a run is a run of its own or left out by name. Each file's part is
    taken before its bytes are read: in the walk's own pass, before any file of the run is
    opened, for a run the stat cache holds; as each file is opened, for a run new to it
    (ListingParts)."""

    model_config = ConfigDict(frozen=True)

    digest: str
    newest_mtime_ns: int
    """The newest mtime among the entries: the cache does not trust a listing as new as
    itself (git's racy rule)."""

    @classmethod
    def of(cls, parts: list[bytes], newest: int) -> Listing:
        """From each entry's part, in any order: its name (UTF-8, undecodable bytes as they
        were), a NUL (no name holds one, so the parts of a listing read back one way only),
        then its identity: mode, size, mtime_ns, ctime_ns and inode (_IDENTITY), or
        _FOLDER for a folder."""
        parts.sort()
        return cls(
            digest=hashlib.blake2b(b"".join(parts), digest_size=16).hexdigest(),
            newest_mtime_ns=newest,
        )


_IDENTITY = struct.Struct("<5q")
_WIDE_IDENTITY = struct.Struct("<5Q")
"""For a value outside a signed 64-bit integer (an inode number above 2**63, as some network
and overlay file systems give): every value modulo 2**64, the same bytes as _IDENTITY's for a
value within it, and still one-to-one over what a stat can hold."""
_FOLDER = _IDENTITY.pack(-1, 0, 0, 0, 0)
_NUL_IDENTITY = struct.Struct("<x5q")
"""A NUL, then _IDENTITY: what follows an entry's name in its part, packed in one call."""
_NUL_FOLDER = b"\0" + _FOLDER
_FILE_TYPE, _LINK = 0o170000, stat.S_IFLNK
"""The bits of a mode that say a file's type (what stat.S_IFMT keeps), and a link's."""


def _wide_identity(status: os.stat_result) -> bytes:
    """A file's identity when a value of it is out of _IDENTITY's range (_WIDE_IDENTITY)."""
    values = (status.st_mode, status.st_size, status.st_mtime_ns, status.st_ctime_ns, status.st_ino)
    return _WIDE_IDENTITY.pack(*(value & 0xFFFF_FFFF_FFFF_FFFF for value in values))


class ListingParts:
    """A run directory's listing (Listing) taken as its files are read rather than by
    discovery: each file's part from the stat of the descriptor it was read through (fstat
    and lstat agree on a regular file opened without following a link), taken before its
    bytes were read, as discovery's lstat was; the entries not read (folders, files left out)
    as discovery gives them. A listing so taken is the one the next discovery takes of the
    same directory, byte for byte, so the run's stat cache entry holds (`_list` packs the
    same parts inline, for speed)."""

    def __init__(self) -> None:
        self.parts: list[bytes] | None = []
        self.newest = 0

    def add(self, name: str, status: os.stat_result) -> None:
        """The entry `name`, as `status` (a stat that did not follow a link) describes it."""
        if self.parts is None:
            return
        mtime_ns = status.st_mtime_ns
        try:
            identity = _NUL_IDENTITY.pack(
                status.st_mode, status.st_size, mtime_ns, status.st_ctime_ns, status.st_ino
            )
        except struct.error:
            identity = b"\0" + _wide_identity(status)
        self.parts.append(name.encode("utf-8", "surrogateescape") + identity)
        if mtime_ns > self.newest:
            self.newest = mtime_ns

    def add_entry(self, entry: os.DirEntry[str]) -> None:
        """An entry that is not read, lstat'ed now; one that cannot be leaves the run with no
        listing, as in discovery (then it is not cached)."""
        try:
            self.add(entry.name, entry.stat(follow_symlinks=False))
        except OSError:
            self.parts = None

    def add_folder(self, name: str) -> None:
        if self.parts is not None:
            self.parts.append(name.encode("utf-8", "surrogateescape") + _NUL_FOLDER)

    def listing(self) -> Listing | None:
        return None if self.parts is None else Listing.of(self.parts, self.newest)


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
    """None when an entry could not be stat'ed (then the run is read and not cached), or when
    discovery took none (`listed`)."""
    listed: bool = True
    """False when discovery took no listing, as no stat cache entry could use one (a run new
    to the bundles folder): its reading takes it (ListingParts), without stat'ing every file
    once more before reading it."""


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


def discover(output_root: Path, *, listed: Callable[[str], bool] | None = None) -> Discovery:
    """List the run directories below `output_root`, plus what was skipped or refused.
    `listed` says of a folder (its path) whether to take its listing (each entry lstat'ed,
    Listing) as it is walked; None: of every folder."""
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
            _walk(Path(entry.path), output_root, task, runs, skipped, refused, listed)
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

    found: list[tuple[str, int, list[str], Listing | None, bool]] = field(default_factory=list)
    elsewhere: list[tuple[str, list[str]]] = field(default_factory=list)
    refused: list[Skipped] = field(default_factory=list)


def _scan(pending: list[str], stat_entries: Callable[[str], bool] | None = None) -> _Scanned:
    """Walk the folders of `pending` (a stack: the last is walked first) and all below them;
    each one's listing taken where `stat_entries` (if given) says so."""
    scanned = _Scanned()
    while pending:
        directory = pending.pop()
        try:
            listed = _list(directory, stat_entries is None or stat_entries(directory))
        except OSError as error:
            reason = (
                "symbolic link; links are never followed"  # swapped in since it was listed
                if error.errno in (errno.ELOOP, errno.ENOTDIR) and os.path.islink(directory)
                else f"cannot list: {error.strerror}"
            )
            scanned.refused.append(Skipped(path=directory, reason=reason))
            continue
        if listed.holds_run_file:
            scanned.found.append(
                (
                    directory,
                    listed.predictions,
                    listed.subdirectories,
                    listed.listing,
                    listed.listed,
                )
            )
        else:
            scanned.elsewhere.append((directory, listed.files))
        scanned.refused.extend(
            Skipped(path=path, reason="symbolic link; links are never followed")
            for path in sorted(listed.linked_directories)
        )
        pending.extend(sorted(listed.subdirectories, reverse=True))
    return scanned


@dataclass
class _Listed:
    """One folder, as `_list` saw it."""

    holds_run_file: bool = False
    predictions: int = 0
    subdirectories: list[str] = field(default_factory=list)
    linked_directories: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    """Its files, but only until a run file shows the folder is a run."""
    listing: Listing | None = None
    listed: bool = True
    """False when the entries were not stat'ed (no listing taken)."""


def _list(directory: str, stat_entries: bool = True) -> _Listed:
    """One pass over a folder in listing order, which is most of what a collect with nothing
    new does: a nightly tree has tens of thousands of entries, each lstat'ed here for the stat
    cache (see Listing). So the loop does no more than it must for each entry: what it finds
    is kept in local names, a link is told by the mode its lstat gave, each entry's name and
    packed identity are collected as they come (sorted, rather than the entries, once at the
    end), and each entry is let go once seen (it keeps its lstat result while it lives: a run
    directory can hold 100,000 files, whose parts, about 100 bytes a file, are all it keeps).
    Without `stat_entries` nothing is stat'ed (no listing is taken: `_Listed.listed`).
    Raises OSError when the folder cannot be listed."""
    pack, info_files = _NUL_IDENTITY.pack, RUN_INFO_FILES
    file_type, link = _FILE_TYPE, _LINK
    predictions = 0
    holds_run_file = False
    subdirectories: list[str] = []
    links: list[tuple[str, bool]] = []
    files: list[str] = []  # names, until a run file shows the folder is a run
    parts: list[bytes] | None = [] if stat_entries else None
    newest = 0
    # Listed through a descriptor of the folder, opened without following a link: a folder
    # swapped for a link since its parent was listed is refused, never walked; and each lstat
    # is made relative to it (fstatat), sparing the kernel the whole path each time.
    descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        with os.scandir(descriptor) as scan:
            for entry in scan:
                name = entry.name
                if name.startswith("prediction_") and name.endswith(".json") and "\n" not in name:
                    # PREDICTION_FILE.fullmatch(name), in a third of its time: `.` matches
                    # all but a newline, and the prefix (no ".") cannot overlap the suffix.
                    run_file = holds_run_file = True
                    predictions += 1
                elif name in info_files:
                    run_file = holds_run_file = True
                else:
                    run_file = False
                if entry.is_dir(follow_symlinks=False):  # a folder, not a link to one
                    subdirectories.append(f"{directory}/{name}")
                    if parts is not None:
                        parts.append(name.encode("utf-8", "surrogateescape") + _NUL_FOLDER)
                    continue
                if not holds_run_file:
                    files.append(name)
                if parts is not None:
                    try:
                        status = entry.stat(follow_symlinks=False)
                    except OSError:
                        parts = None  # then the run is read
                    else:
                        mode, mtime_ns = status.st_mode, status.st_mtime_ns
                        try:
                            identity = pack(
                                mode, status.st_size, mtime_ns, status.st_ctime_ns, status.st_ino
                            )
                        except struct.error:
                            identity = b"\0" + _wide_identity(status)
                        parts.append(name.encode("utf-8", "surrogateescape") + identity)
                        if mtime_ns > newest:
                            newest = mtime_ns
                        if mode & file_type != link:
                            continue
                if entry.is_symlink():
                    links.append((f"{directory}/{name}", run_file))
    finally:
        os.close(descriptor)
    listed = _Listed(holds_run_file, predictions, subdirectories, listed=stat_entries)
    # Links to run files are refused with their run; other links would be skipped silently
    # as "extra files", so a linked directory is called out here.
    listed.linked_directories = [
        path for path, run_file in links if not run_file and _leads_to_folder(path)
    ]
    if holds_run_file:
        listed.listing = None if parts is None else Listing.of(parts, newest)
    else:
        linked = set(listed.linked_directories)
        joined = (f"{directory}/{name}" for name in files)
        listed.files = [path for path in joined if path not in linked]
    return listed


def _leads_to_folder(link: str) -> bool:
    """Whether a link points at a folder; False when it cannot be followed (a loop, a link
    to itself: what it is then is the run's reader's to say, never an internal error)."""
    try:
        return stat.S_ISDIR(os.stat(link).st_mode)
    except OSError:
        return False


def _walk(
    top: Path,
    output_root: Path,
    task: str,
    runs: list[RunDirectory],
    skipped: list[Skipped],
    refused: list[Skipped],
    listed: Callable[[str], bool] | None,
) -> None:
    """Every run directory below `top`, depth first in name order, with an explicit stack: a
    tree thousands of folders deep is walked like any other, never overflowing the call stack.
    Which folders lead to no run is known once the whole tree has been walked: a run's own
    such subfolders are left out with the run; outside a run, each file in a folder on the
    way to a run, and each topmost folder that leads to none, is reported skipped. Paths are
    strings until a run is reported: a nightly tree has tens of thousands of entries, and
    this walk is most of what a collect with nothing new does."""
    top_path = str(top)
    scanned = _scan([top_path], listed)
    found, elsewhere = scanned.found, scanned.elsewhere
    refused.extend(scanned.refused)
    leading_to_runs: set[str] = {top_path}
    for directory, *_ in found:
        while directory != top_path and directory not in leading_to_runs:
            leading_to_runs.add(directory)
            directory = os.path.dirname(directory)
    run_directories = {directory for directory, *_ in found}
    for directory, files in elsewhere:
        parent = os.path.dirname(directory)
        if directory in leading_to_runs:
            skipped.extend(
                Skipped(path=path, reason="not in a run directory; never bundled")
                for path in sorted(files)
            )
        elif parent in leading_to_runs and parent not in run_directories:
            skipped.append(Skipped(path=directory, reason="holds no run; never bundled"))
    task_folder = top.relative_to(output_root).as_posix()
    for directory, predictions, subdirectories, listing, taken in found:
        left_out = [sub for sub in subdirectories if sub not in leading_to_runs]
        runs.append(
            RunDirectory(
                path=Path(directory),
                # Below `top_path`, joined by the walk with "/": no Path made to cut it off.
                relative=task_folder + directory[len(top_path) :],
                task_dir_name=task,
                predictions=predictions,
                left_out_folders=tuple(sorted(os.path.basename(sub) for sub in left_out)),
                listing=listing,
                listed=taken,
            )
        )
