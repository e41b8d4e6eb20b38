"""The one source of the bundle layout: the bundle id, and every local and repository path.

A bundle id is `<player-slug>_<fp8>/<task>@<rev8>`. It is formatted and parsed here and nowhere
else, and every path a bundle occupies (its archive and sidecar in a local bundles folder, its
archive, sidecar and row in the dataset repository) is derived from a `BundleId` value, never
built from strings elsewhere. A value validates itself, so a path that reached this module from
a stranger (a repository listing, a manifest, a command line) cannot escape its folder.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from bundler.naming import SAFE_TASK_NAME, slugify

ARCHIVE_SUFFIX = ".tar.zst"
SIDECAR_SUFFIX = ".json"
ROW_SUFFIX = ".jsonl"
BUNDLES_DIR = "bundles"
"""The repository folder holding bundles: exactly a local bundles folder's layout."""
ROWS_DIR = "rows"
"""The repository folder holding one viewer row per bundle, mirroring `bundles/`."""
README = "README.md"
REJECTED_DIR = ".rejected"
"""Where download keeps bundles that failed verification, apart from the good ones."""
TEMP_PREFIX = ".bundler-"
"""Every temporary file or folder the bundler makes starts with this, so leftovers of a killed
run are recognisable as its own and nothing else is ever removed."""
TEMP_SUFFIX = ".partial"
"""The end of a temporary file written beside its final path: `<TEMP_PREFIX><name>.<random>`
then this, so `find`ing the leftovers of a bundler run is one pattern."""

FINGERPRINT_PREFIX_LENGTH = 8
_PLAYER_DIR = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*_[0-9a-f]{8}")
_REVISION_LABEL = re.compile(r"[0-9A-Fa-f]{8}|unpinned")


class LayoutError(ValueError):
    """A string that claims to be a bundle id or a bundle path but is not one."""


@dataclass(frozen=True, order=True)
class BundleId:
    """`<player-slug>_<fp8>/<task>@<rev8>`: one player setup's result on one dataset revision."""

    player_dir: str
    task: str
    revision_label: str

    def __post_init__(self) -> None:
        if not _PLAYER_DIR.fullmatch(self.player_dir):
            raise LayoutError(f"{self.player_dir!r} is not <player-slug>_<fp8>")
        if not SAFE_TASK_NAME.fullmatch(self.task):
            raise LayoutError(f"{self.task!r} is not a safe task name")
        if not _REVISION_LABEL.fullmatch(self.revision_label):
            raise LayoutError(f"{self.revision_label!r} is not a revision label")

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

    @property
    def repo_archive(self) -> str:
        return f"{BUNDLES_DIR}/{self.player_dir}/{self.archive_name}"

    @property
    def repo_sidecar(self) -> str:
        return f"{BUNDLES_DIR}/{self.player_dir}/{self.sidecar_name}"

    @property
    def repo_row(self) -> str:
        return f"{ROWS_DIR}/{self.player_dir}/{self.target}{ROW_SUFFIX}"

    @property
    def repo_paths(self) -> tuple[str, str, str]:
        """Every repository path this bundle owns: archive, sidecar and row."""
        return (self.repo_archive, self.repo_sidecar, self.repo_row)


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
    return archive.with_name(archive.name.removesuffix(ARCHIVE_SUFFIX) + SIDECAR_SUFFIX)


def id_of_local_archive(archive: Path) -> BundleId:
    """The bundle id an archive's place in a bundles folder names; LayoutError if none."""
    if not is_archive_path(archive):
        raise LayoutError(f"{archive.name!r} is not a {ARCHIVE_SUFFIX} file")
    return BundleId.parse(f"{archive.parent.name}/{archive.name.removesuffix(ARCHIVE_SUFFIX)}")


def bundle_ids_in(repo_paths: Iterable[str]) -> tuple[list[BundleId], list[str]]:
    """The bundles a repository listing holds, from its archives under `bundles/`, in order,
    and the archive-like paths under `bundles/` that are not a valid bundle layout."""
    prefix = f"{BUNDLES_DIR}/"
    found: set[BundleId] = set()
    invalid: list[str] = []
    for path in repo_paths:
        if not (path.startswith(prefix) and path.endswith(ARCHIVE_SUFFIX)):
            continue
        try:
            found.add(BundleId.parse(path.removeprefix(prefix).removesuffix(ARCHIVE_SUFFIX)))
        except LayoutError:
            invalid.append(path)
    return sorted(found), sorted(invalid)
