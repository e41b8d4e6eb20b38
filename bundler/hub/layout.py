"""The dataset repository's layout: where each bundle's files go, and the viewer's configs.

Every repository path is derived from a `BundleId` (`bundler.local.layout`), never built from
strings elsewhere, and every file belongs to one bundle, so commits for different bundles never
change the same file; only the card is shared. The names and file globs of the dataset viewer's
configs live here too: they select those paths.
"""

from __future__ import annotations

from collections.abc import Iterable

from bundler.core.naming import SAFE_TASK_NAME
from bundler.local.layout import ARCHIVE_SUFFIX, BundleId, LayoutError

ROW_SUFFIX = ".jsonl"
BUNDLES_DIR = "bundles"
"""The repository folder holding bundles: exactly a local bundles folder's layout."""
ROWS_DIR = "rows"
"""The repository folder holding one viewer row per bundle, mirroring `bundles/`."""
TASKS_DIR = "tasks"
"""The repository folder holding each bundle's row again, in its task's leaderboard table:
`tasks/<task>/<player>_<fp8>/<task>@<rev8>.jsonl`. Nested like `bundles/`, so that no folder
in it ever holds more entries than a folder of `bundles/` does (the Hub allows 10,000 a
folder): `tasks/` one per task, `tasks/<task>/` one per player setup that ran the task, and a
player folder one per dataset revision of the task."""
ALL_TASKS_CONFIG = "default"
"""The dataset viewer's config showing every bundle of every task as one table."""
README = "README.md"


def repo_archive(bundle: BundleId) -> str:
    return f"{BUNDLES_DIR}/{bundle.player_dir}/{bundle.archive_name}"


def repo_sidecar(bundle: BundleId) -> str:
    return f"{BUNDLES_DIR}/{bundle.player_dir}/{bundle.sidecar_name}"


def repo_row(bundle: BundleId) -> str:
    return f"{ROWS_DIR}/{bundle.player_dir}/{bundle.target}{ROW_SUFFIX}"


def repo_task_row(bundle: BundleId) -> str:
    """The bundle's row in its task's leaderboard table (see TASKS_DIR)."""
    return f"{TASKS_DIR}/{bundle.task}/{bundle.player_dir}/{bundle.target}{ROW_SUFFIX}"


def repo_paths(bundle: BundleId) -> tuple[str, str, str, str]:
    """Every repository path this bundle owns: archive, sidecar, row and task row. A commit
    for a bundle touches these and nothing else, so commits for different bundles (two pull
    requests, or a pull request and main) never change the same file."""
    return (repo_archive(bundle), repo_sidecar(bundle), repo_row(bundle), repo_task_row(bundle))


ALL_ROWS_GLOB = f"{ROWS_DIR}/**/*{ROW_SUFFIX}"
"""The all-tasks config's data files: every bundle's row."""


def task_rows_glob(task: str) -> str:
    """The data files of `task`'s config: the task rows of its bundles, and nothing else (a
    task name holds no glob characters, and the `/` after it stops `maze` matching `maze-2`)."""
    return f"{TASKS_DIR}/{task}/*/*{ROW_SUFFIX}"


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
        try:
            found.add(BundleId.parse(path.removeprefix(prefix).removesuffix(ARCHIVE_SUFFIX)))
        except LayoutError:
            invalid.append(path)
    return sorted(found), sorted(invalid)


def row_ids_in(repo_paths: Iterable[str]) -> list[BundleId]:
    """The bundles whose own row file (`repo_row`) a repository listing holds, in order;
    every other path, under `rows/` or not, is ignored."""
    prefix = f"{ROWS_DIR}/"
    found: set[BundleId] = set()
    for path in repo_paths:
        if not (path.startswith(prefix) and path.endswith(ROW_SUFFIX)):
            continue
        try:
            bundle = BundleId.parse(path.removeprefix(prefix).removesuffix(ROW_SUFFIX))
        except LayoutError:
            continue
        if repo_row(bundle) == path:
            found.add(bundle)
    return sorted(found)
