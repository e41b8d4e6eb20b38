"""The dataset repository's layout (version 3): where each bundle's files go, where the
leaderboard's tables are, and the viewer's configs.

```
README.md                                          the dataset card
bundles/<xx>/<player>_<fp8>/<task>@<rev8>.tar.zst  a bundle, in its shard <xx>
bundles/<xx>/<player>_<fp8>/<task>@<rev8>.json     its sidecar
leaderboard/bundles/part-<n>.parquet               every bundle's row, in parts (`default` config)
leaderboard/tasks/<task>.parquet                   each task's best, ranked (one config per task)
leaderboard/charts/<task>.png                      each defined task's chart, shown on the card
leaderboard/tasks.json                             the maintainers' task definitions
leaderboard/derived.json                           what the bundler's last commit derived
leaderboard/allowed_signers                        who may sign bundles (tasks.signers)
```

Every bundle path is derived from a `BundleId` (`bundler.local.layout`), never built from
strings elsewhere. A bundle owns its archive and sidecar and nothing else, so pull requests for
different bundles never change the same file; the tables and the card are shared, and only the
bundler's commits to a branch write them.

The Hub takes at most 10,000 entries in a folder (`bundler.hub.client.limits`). `bundles/`
holds 256 shards, `<xx>` the first two hex digits of the sha256 of the player folder's name: at
100,000 bundles, even with a setup per bundle, a shard holds about 400 player folders. A local
bundles folder has no shards. Layout 2 had the player folders right under `bundles/` (the
10,001st setup was refused), and layout 1 also a row file per bundle under `rows/` and
`tasks/`: the commit that upgrades a repository moves layout 2's bundles into their shards and
removes layout 1's rows, unread.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

from bundler.core.naming import SAFE_TASK_NAME
from bundler.local.layout import ARCHIVE_SUFFIX, SIDECAR_SUFFIX, BundleId, LayoutError

BUNDLES_DIR = "bundles"
"""The repository folder holding bundles, in shards."""
SHARD_DIGITS = 2
"""Hex digits of a shard's name: 256 shards."""
TABLES_DIR = "leaderboard"
ALL_TABLE = f"{TABLES_DIR}/bundles.parquet"
"""The all-tasks table as one file, until format 3 of the record: read once more, to be split
into parts, and removed."""
TABLE_PARTS_DIR = f"{TABLES_DIR}/bundles"
"""The all-tasks table, one row per bundle with the same columns for every task, as parts of
at most PART_ROWS rows each (`bundler.hub.leaderboard.tables`): the viewer, `datasets`, DuckDB
and Polars read the folder as one table."""
TASK_TABLES_DIR = f"{TABLES_DIR}/tasks"
"""One table per task, so `leaderboard/tasks/` holds one entry per task (the Hub allows 10,000
a folder)."""
TABLE_SUFFIX = ".parquet"
CHARTS_DIR = f"{TABLES_DIR}/charts"
"""One chart per defined task (`bundler.hub.leaderboard.chart`), beside the task tables."""
CHART_SUFFIX = ".png"
ALL_TASKS_CONFIG = "default"
"""The dataset viewer's config showing every bundle of every task as one table."""
README = "README.md"
TASKS_FILE = f"{TABLES_DIR}/tasks.json"
"""The maintainers' definitions of the leaderboard's tasks (`bundler.hub.tasks.definitions`); only a
maintainer's commit changes it, never a pull request."""
ALLOWED_SIGNERS = f"{TABLES_DIR}/allowed_signers"
"""Who may sign the leaderboard's bundles, in OpenSSH's allowed-signers format
(`bundler.hub.tasks.signers`); only a maintainer's commit changes it, never a pull request."""
RECORD = f"{TABLES_DIR}/derived.json"
"""What the bundler's last commit to a branch derived: the bytes of every table and the card,
and the bundles left off the board (`bundler.hub.leaderboard.record`)."""
MAX_NAME_BYTES = 255
"""The longest file or folder name a file system takes (ext4, APFS, NTFS): a path component
past it gives `File name too long` on every machine that downloads it."""
ROWS_DIR = "rows"
"""Layout 1: one row file per bundle, `rows/<player>_<fp8>/<task>@<rev8>.jsonl` (never read: a
repository in layout 1 has its board derived from its bundles, and these folders removed)."""
LEGACY_DIRS = (ROWS_DIR, "tasks")
"""Layout 1's folders of row files, removed when a repository is upgraded."""


def repo_folder(bundle: BundleId) -> str:
    """The folder of a bundle's player setup: `bundles/<shard>/<player>_<fp8>`."""
    shard = hashlib.sha256(bundle.player_dir.encode("utf-8")).hexdigest()[:SHARD_DIGITS]
    return f"{BUNDLES_DIR}/{shard}/{bundle.player_dir}"


def repo_archive(bundle: BundleId) -> str:
    return repo_paths(bundle)[0]


def repo_sidecar(bundle: BundleId) -> str:
    return repo_paths(bundle)[1]


def unsharded_paths(bundle: BundleId) -> tuple[str, str]:
    """Where layout 2 kept the bundle's archive and sidecar: no shard (read only, to move
    them)."""
    folder = f"{BUNDLES_DIR}/{bundle.player_dir}"
    return (f"{folder}/{bundle.archive_name}", f"{folder}/{bundle.sidecar_name}")


def repo_paths(bundle: BundleId) -> tuple[str, str]:
    """Every repository path this bundle owns: its archive and its sidecar. A pull request
    for a bundle touches these and nothing else. The folder is derived once for both (a
    sha256 of the player folder's name: planning asks for thousands of bundles' paths)."""
    folder = repo_folder(bundle)
    return (f"{folder}/{bundle.archive_name}", f"{folder}/{bundle.sidecar_name}")


FILES_PER_BUNDLE = len(repo_paths(BundleId("bundle_00000000", "task", "unpinned")))
"""The files a bundle owns in the repository, whatever its id: a repository of N bundles holds
this many files per bundle, beside the tables and the card."""


def task_table(task: str) -> str:
    """The table of `task`'s leaderboard (a task name is a safe file name)."""
    if not SAFE_TASK_NAME.fullmatch(task):
        raise LayoutError(f"{task!r} is not a safe task name")
    return f"{TASK_TABLES_DIR}/{task}{TABLE_SUFFIX}"


ALL_TABLE_FILES = f"{TABLE_PARTS_DIR}/*{TABLE_SUFFIX}"
"""The all-tasks table's parts, as the dataset viewer and DuckDB take a table in files."""


def table_part(number: int) -> str:
    """The path of the all-tasks table's part `number` (parts sort by name as by number)."""
    return f"{TABLE_PARTS_DIR}/part-{number:05d}{TABLE_SUFFIX}"


def part_number(path: str) -> int | None:
    """The number of the part at `path`; None for any other path."""
    found = _PART.fullmatch(path)
    return int(found.group(1)) if found else None


_PART = re.compile(re.escape(f"{TABLE_PARTS_DIR}/part-") + r"(\d{5})" + re.escape(TABLE_SUFFIX))


def task_chart(task: str) -> str:
    """The chart of `task`'s leaderboard, shown on the card."""
    if not SAFE_TASK_NAME.fullmatch(task):
        raise LayoutError(f"{task!r} is not a safe task name")
    return f"{CHARTS_DIR}/{task}{CHART_SUFFIX}"


def chart_task(path: str) -> str | None:
    """The task whose chart `path` is, exactly as `task_chart` spells it; None for any other
    path."""
    prefix = f"{CHARTS_DIR}/"
    if not (path.startswith(prefix) and path.endswith(CHART_SUFFIX)):
        return None
    task = path.removeprefix(prefix).removesuffix(CHART_SUFFIX)
    return task if SAFE_TASK_NAME.fullmatch(task) else None


def task_config_name(task: str) -> str:
    """The dataset viewer's config name for `task`'s leaderboard table.

    A task name is already a valid config name (`[A-Za-z0-9][A-Za-z0-9._-]*`), and it is kept
    as it is, except that a task called `default` (in any letter case) would take the place of
    the all-tasks config: it becomes `_default`. The leading `_` keeps the mapping one to one,
    since no task name starts with `_`.
    """
    if not SAFE_TASK_NAME.fullmatch(task):
        raise LayoutError(f"{task!r} is not a safe task name")
    return f"_{task}" if task.lower() == ALL_TASKS_CONFIG else task


def bundle_ids_in(repo_paths: Iterable[str]) -> tuple[list[BundleId], list[str]]:
    """The bundles a repository listing holds, from its archives under `bundles/`, in order,
    and the archive-like paths under `bundles/` that are not a valid bundle layout."""
    prefix = f"{BUNDLES_DIR}/"
    found: set[BundleId] = set()
    invalid: list[str] = []
    for path in repo_paths:
        if not (path.startswith(prefix) and path.endswith(ARCHIVE_SUFFIX)):
            continue
        bundle = bundle_of_path(path)
        if bundle is None:
            invalid.append(path)
        else:
            found.add(bundle)
    return sorted(found), sorted(invalid)


def bundle_of_path(path: str) -> BundleId | None:
    """The bundle whose archive or sidecar `path` is, exactly as `repo_paths` spells them;
    None for any other path, including one a file system could not hold (a name past
    MAX_NAME_BYTES) or one BundleId does not parse."""
    return _bundle_at(path, shards=True)


def unsharded_bundle_of(path: str) -> BundleId | None:
    """The bundle whose archive or sidecar `path` is in layout 2 (`unsharded_paths`)."""
    return _bundle_at(path, shards=False)


def _bundle_at(path: str, *, shards: bool) -> BundleId | None:
    if any(len(part.encode("utf-8")) > MAX_NAME_BYTES for part in path.split("/")):
        return None
    prefix = f"{BUNDLES_DIR}/"
    if not path.startswith(prefix):
        return None
    relative = path.removeprefix(prefix)
    if shards:
        relative = relative.partition("/")[2]
    for suffix in (ARCHIVE_SUFFIX, SIDECAR_SUFFIX):
        if relative.endswith(suffix):
            try:
                bundle = BundleId.parse(relative.removesuffix(suffix))
            except LayoutError:
                return None
            owned = repo_paths(bundle) if shards else unsharded_paths(bundle)
            return bundle if path in owned else None
    return None
