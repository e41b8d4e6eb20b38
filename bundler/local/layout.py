"""The one source of the local bundle layout: the bundle id, and every local path.

A bundle id is `<player-slug>_<fp8>/<task>@<rev8>`. It is formatted and parsed here and nowhere
else, and every path a bundle occupies in a local bundles folder (its archive and sidecar) is
derived from a `BundleId` value, never built from strings elsewhere. A value validates itself,
so a path that reached this module from a stranger (a repository listing, a manifest, a command
line) cannot escape its folder. The repository's paths, which the Hub wing owns, are derived
from the same value in `bundler.hub.repo.paths`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from bundler.core.errors import UsageError
from bundler.core.naming import SAFE_TASK_NAME, slugify
from bundler.local.schema import UNPINNED_LABEL

ARCHIVE_SUFFIX = ".tar.zst"
SIDECAR_SUFFIX = ".json"
REJECTED_DIR = ".rejected"
"""Where download keeps bundles that failed verification, apart from the good ones."""
TEMP_PREFIX = ".bundler-"
"""Every temporary file or folder the bundler makes starts with this, so leftovers of a killed
run are recognisable as its own and nothing else is ever removed."""
TEMP_SUFFIX = ".partial"
"""The end of a temporary file written beside its final path: `<TEMP_PREFIX><name>.<random>`
then this, so `find`ing the leftovers of a bundler run is one pattern."""

LOCK_NAME = ".bundler.local.lock"
"""The lock file in a bundles folder that keeps two collects, uploads or syncs from working on
it at once. Hidden, so it is never taken for a bundle, and deliberately outside the
TEMP_PREFIX pattern: it is no leftover, and removing it while another run holds or waits on
it would let a third run in beside the holder."""

COLLECT_CACHE_NAME = ".bundler.collect.cache"
VERIFY_CACHE_NAME = ".bundler.verify.cache"
CACHE_NAMES = (COLLECT_CACHE_NAME, VERIFY_CACHE_NAME)
"""The stat caches at the top of a bundles folder (bundler.local.statcache): hidden like the
lock file, so never taken for a bundle, outside the TEMP_PREFIX pattern (no leftover), and
not ending in `.json` like a sidecar (JSON inside, all the same)."""

FINGERPRINT_PREFIX_LENGTH = 8
MAX_NAME_CHARS = 255
"""The longest file name a file system takes: a bundle's folder and file names stay within it."""
_PLAYER_DIR = re.compile(r"(?:[a-z0-9]+(?:-[a-z0-9]+)*)?_[0-9a-f]{8}")
"""`<player-slug>_<fp8>`. The slug is empty for a player name with no ASCII letter or digit
(`模型-β`): the folder is then `_<fp8>`, named by the fingerprint alone, as GPTNT's own
`<slug>_<fp8>` leaves it, so every name can be bundled and names accepted before keep their
folders."""
_REVISION_LABEL = re.compile(rf"[0-9a-f]{{8}}|{UNPINNED_LABEL}")
"""Lower-case hex only: one pin has one name, on a case-insensitive disk too."""


class LayoutError(ValueError):
    """A string that claims to be a bundle id or a bundle path but is not one."""


def check_target(task: str, revision_label: str) -> None:
    """A target's parts as a bundle's name needs them: a safe task name, and a canonical
    revision label (8 lower-case hex digits, or `unpinned`); LayoutError otherwise."""
    if not SAFE_TASK_NAME.fullmatch(task):
        raise LayoutError(f"{task!r} is not a safe task name")
    if not _REVISION_LABEL.fullmatch(revision_label):
        raise LayoutError(
            f"{revision_label!r} is not a revision label (8 lower-case hex digits "
            f"or {UNPINNED_LABEL})"
        )


@dataclass(frozen=True, order=True)
class BundleId:
    """`<player-slug>_<fp8>/<task>@<rev8>`: one player setup's result on one dataset revision.
    The slug may be empty (`_<fp8>`); the fingerprint alone names the setup uniquely."""

    player_dir: str
    task: str
    revision_label: str

    def __post_init__(self) -> None:
        if not _PLAYER_DIR.fullmatch(self.player_dir):
            raise LayoutError(f"{self.player_dir!r} is not <player-slug>_<fp8>")
        check_target(self.task, self.revision_label)
        longest = max(len(self.player_dir), len(self.archive_name), len(self.sidecar_name))
        if longest > MAX_NAME_CHARS:  # ASCII by the patterns above: characters are bytes
            raise LayoutError(
                f"{self.player_dir}/{self.target} makes a file name of {longest} characters;"
                f" a file system takes {MAX_NAME_CHARS}"
            )

    @classmethod
    def of(cls, player_name: str, fingerprint: str, target: str) -> BundleId:
        """The id of a run, from its player name, capability fingerprint and target."""
        player_dir = f"{slugify(player_name)}_{fingerprint[:FINGERPRINT_PREFIX_LENGTH]}"
        task, _, label = target.rpartition("@")
        return cls(player_dir, task, label)

    @classmethod
    def parse(cls, text: str) -> BundleId:
        """Read `<player>_<fp8>/<task>@<rev8>`; raise LayoutError for anything else."""
        player_dir, slash, target = text.partition("/")
        task, at, label = target.rpartition("@")
        if not slash or not at:
            raise LayoutError(f"{text!r} is not a bundle id <player>_<fp8>/<task>@<rev8>")
        return cls(player_dir, task, label)

    @property
    def target(self) -> str:
        """`StaticsIdentity.target`, the bundle's leaf name."""
        return f"{self.task}@{self.revision_label}"

    @property
    def is_pinned(self) -> bool:
        return self.revision_label != UNPINNED_LABEL

    def __str__(self) -> str:
        return f"{self.player_dir}/{self.target}"

    @property
    def archive_name(self) -> str:
        return self.target + ARCHIVE_SUFFIX

    @property
    def sidecar_name(self) -> str:
        return self.target + SIDECAR_SUFFIX

    def local_archive(self, bundles_dir: Path) -> Path:
        return bundles_dir / self.player_dir / self.archive_name

    def local_sidecar(self, bundles_dir: Path) -> Path:
        return bundles_dir / self.player_dir / self.sidecar_name


def temporary_prefix(final: Path) -> str:
    """The start of the name of a temporary file that will become `final`."""
    return f"{TEMP_PREFIX}{final.name}."


def is_temporary_name(name: str) -> bool:
    """A name the bundler gives a temporary file (see `temporary_prefix`, TEMP_SUFFIX)."""
    return name.startswith(TEMP_PREFIX) and name.endswith(TEMP_SUFFIX)


def is_archive_path(path: Path | str) -> bool:
    return str(path).endswith(ARCHIVE_SUFFIX)


def sidecar_of(archive: Path) -> Path:
    """The sidecar beside an archive: `<target>.json` for `<target>.tar.zst`."""
    return Path(sidecar_path_of(os.fspath(archive)))


def sidecar_path_of(archive: str) -> str:
    """`sidecar_of` for an archive's path as a string (`find_archive_paths`)."""
    return archive.removesuffix(ARCHIVE_SUFFIX) + SIDECAR_SUFFIX


def id_of_local_archive(archive: Path) -> BundleId:
    """The bundle id an archive's place in a bundles folder names; LayoutError if none."""
    if not is_archive_path(archive):
        raise LayoutError(f"{archive.name!r} is not a {ARCHIVE_SUFFIX} file")
    return BundleId.parse(f"{archive.parent.name}/{archive.name.removesuffix(ARCHIVE_SUFFIX)}")


GPTNT_SUBMISSION_FILE = "submission.yaml"
"""The manifest of a GPTNT submission folder, as `gptnt submission new` names it."""
GPTNT_METRICS_FILE = "metrics.json"
"""The payload of a GPTNT statics submission folder: the run's metrics.json, byte for byte."""
_GPTNT_INSTANT = re.compile(r"(\d{4})-(\d{2})-(\d{2})T\d{2}:\d{2}:\d{2}(?:\.\d*[1-9])?Z")
_FINGERPRINT = re.compile(r"[0-9a-f]{32}")


@dataclass(frozen=True)
class GptntSubmissionName:
    """GPTNT's naming of a statics submission: its `submission_id` and its folder.

    `gptnt submission validate` derives both again from submission.yaml and fails a folder whose
    name or id differ, so they are built here exactly as GPTNT builds them: the date is the UTC
    date of the run's instant, the id names the player by its slugged `player_name`, the folder
    by its slugged leaderboard `display_name`. Every part of the folder name is a slug, hex or
    digits, so it is always one safe path component.
    """

    player_name: str
    display_name: str
    fingerprint: str
    task: str
    revision_label: str
    run_instant: str
    """The run date as GPTNT writes it: a UTC instant ending in `Z`."""

    def __post_init__(self) -> None:
        if not _FINGERPRINT.fullmatch(self.fingerprint):
            raise LayoutError(f"{self.fingerprint!r} is not a 32-hex capability fingerprint")
        if not _GPTNT_INSTANT.fullmatch(self.run_instant):
            raise LayoutError(f"{self.run_instant!r} is not a UTC instant as GPTNT writes it")
        check_target(self.task, self.revision_label)

    @property
    def _short_fingerprint(self) -> str:
        return self.fingerprint[:FINGERPRINT_PREFIX_LENGTH]

    @property
    def submission_id(self) -> str:
        """`<YYYY-MM-DD>_<slug(player_name)>_<fp8>_<task>@<rev8>`."""
        target = f"{self.task}@{self.revision_label}"
        player = slugify(self.player_name)
        return f"{self.run_instant[:10]}_{player}_{self._short_fingerprint}_{target}"

    @property
    def folder_name(self) -> str:
        """`YYYYMMDD_<slug(display_name)>_<fp8>_<slug(task)>_<slug(rev8)>`."""
        parts = (
            self.run_instant[:10].replace("-", ""),
            slugify(self.display_name),
            self._short_fingerprint,
            slugify(self.task),
            slugify(self.revision_label),
        )
        return "_".join(parts)

    def folder(self, output_dir: Path) -> Path:
        return output_dir / self.folder_name


def find_archives(paths: list[Path]) -> list[Path]:
    """Archives named directly or found below directories (links not followed, hidden folders
    skipped), in name order. Raises UsageError for a path that is not there, is not a bundle
    archive, or is a folder with no bundle below it."""
    return [Path(path) for path in find_archive_paths(paths)]


def find_archive_paths(paths: list[Path]) -> list[str]:
    """`find_archives`, each path as a string: upload looks up thousands of bundles by path in
    its verify cache, and made them Paths only to turn them back into strings."""
    found: list[str] = []
    for path in paths:
        if path.is_dir() and not path.is_symlink():
            below = _archives_below(path)
            if not below:
                raise UsageError(
                    f"{path}: not a {ARCHIVE_SUFFIX} bundle, and no bundle is below it",
                    hint=f"collect writes <player>_<fp8>/<task>@<rev8>{ARCHIVE_SUFFIX}",
                )
            found.extend(below)
        elif os.path.lexists(path):
            found.append(str(bundle_file(path)))
        else:
            raise UsageError(f"{path}: no such bundle archive or directory")
    return found


def bundle_file(path: Path) -> Path:
    """`path`, when it names one bundle archive: an existing file ending in .tar.zst."""
    if not os.path.lexists(path):
        raise UsageError(f"{path}: no such bundle archive")
    if path.is_dir():
        raise UsageError(
            f"{path}: not a {ARCHIVE_SUFFIX} bundle but a folder",
            hint="name one archive; verifying a folder checks every bundle below it",
            remedy="verify-folder",
        )
    if not (is_archive_path(path) and path.is_file()):
        is_sidecar = path.name.endswith(SIDECAR_SUFFIX)
        hint = f"a sidecar's archive is the {ARCHIVE_SUFFIX} beside it" if is_sidecar else None
        raise UsageError(f"{path}: not a {ARCHIVE_SUFFIX} bundle", hint=hint)
    return path


def _archives_below(top: Path) -> list[str]:
    """Regular `.tar.zst` files below `top`, with an explicit stack (a tree of any depth), in
    the order of their paths' parts (as Paths sort; sorted as strings split at the separator,
    which is faster). Hidden entries are staging, rejected or temporary areas, never bundles
    to trust."""
    found: list[str] = []
    pending = [str(top)]
    while pending:
        directory = pending.pop()
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    if entry.name.startswith(".") or entry.is_symlink():
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        pending.append(entry.path)
                    elif is_archive_path(entry.name) and entry.is_file(follow_symlinks=False):
                        found.append(entry.path)
        except OSError as error:
            raise UsageError(f"{directory}: cannot list: {error.strerror}") from None
    return sorted(found, key=lambda path: path.split(os.sep))
