"""Leaderboards of any size on the local Hub server, for the request budgets (tests/test_budgets.py)
and the benchmarks (tests/benchmark_scale.py, tests/benchmark_nightly.py).

A repository of N bundles is laid out as the bundler lays it out and put on the server in one
commit, without HTTP, so that building N = 100,000 takes minutes, not days of uploads. The
bundles are real: collected from runs written by the project's own tree writer, so a command
that reads one (verify, extend, download, review) reads what `collect` wrote. Every path and
every derived file comes from the bundler's own library, never from a layout spelled out here:
a bundle's files from `LocalBundle.repo_files` (bundler.hub.repo.paths), the tables and the card
from `BranchTables.rendered`, what a commit writes of them, and the record of those. So the
seeded repository follows the layout when it changes, and the bundler takes it for its own.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from factory import RunSpec, write_tree
from hubserver import HubServer

from bundler.core.progress import NoProgress
from bundler.hub.client.remote import git_blob_id
from bundler.hub.leaderboard.branch import BranchTables
from bundler.hub.leaderboard.record import DerivedFile
from bundler.hub.leaderboard.rows import TableRow, build_row
from bundler.hub.leaderboard.tables import AllTasksTable
from bundler.hub.publish.plan import LocalBundle
from bundler.hub.publish.upload import gather_local
from bundler.hub.repo.paths import RECORD, TASKS_FILE
from bundler.hub.tasks.definitions import TaskDefinition, TaskDefinitions
from bundler.local.collect import CollectOptions, collect
from bundler.local.layout import sidecar_of
from bundler.local.submitter import Submitter

TASKS = 10
PREDICTIONS = 3
PUBLISHED_AT = "2026-11-01T10:00:00Z"


def run_specs(n: int, *, start: int = 0, tasks: int = TASKS, **fields: Any) -> list[RunSpec]:
    """N runs of PREDICTIONS predictions each: `tasks` tasks, a player setup per N/tasks, and
    any other RunSpec `fields` (the dataset run on, say). The model names are zero-padded, so
    bundle ids sort in the order of the runs."""
    return [
        RunSpec(
            task=f"task{index % tasks:02d}",
            model=f"model-{index // tasks:05d}",
            rows=PREDICTIONS,
            thoughts_chars=40,
            metrics={"exact_match": {"accuracy": (index % 97) / 97, "n": PREDICTIONS}},
            **fields,
        )
        for index in range(start, start + n)
    ]


def bundles_of(root: Path, specs: list[RunSpec], submitter: Submitter | None = None) -> Path:
    """The runs of `specs` written under `root` and collected into `root/bundles` (naming the
    `submitter` if given)."""
    write_tree(root / "output", specs, how_do_you=False)
    options = CollectOptions(
        expected_rows={spec.task: spec.rows for spec in specs},
        submitter=submitter or Submitter(),
    )
    report = collect(root / "output", root / "bundles", options)
    assert not report.refused, report.refused[:3]
    return root / "bundles"


@dataclass(frozen=True)
class SeedBundle:
    """A bundle as a repository holds it: its files at their repository paths, and its row of
    the tables as the bundler's upload would have derived it."""

    local: LocalBundle
    files: dict[str, bytes]
    row: TableRow

    def copy_to(self, bundles_dir: Path) -> None:
        """Put the bundle in a local bundles folder, as collect left it."""
        archive = self.local.key.local_archive(bundles_dir)
        archive.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.local.archive, archive)
        shutil.copyfile(sidecar_of(self.local.archive), self.local.key.local_sidecar(bundles_dir))


def seed_bundles(bundles: Path) -> list[SeedBundle]:
    """Every bundle of a local bundles folder, verified (by upload's own gathering), in the
    order of their ids."""
    local, set_aside = gather_local(bundles, allow_partial=True, progress=NoProgress())
    assert not set_aside, set_aside[:3]
    seeds = []
    for bundle in sorted(local, key=lambda b: b.bundle_id):
        files = {
            path: content if isinstance(content, bytes) else content.read_bytes()
            for path, content in bundle.repo_files().items()
        }
        row = build_row(bundle.sidecar, bundle.metrics_text, PUBLISHED_AT)
        row = TableRow(**row.model_dump(), sidecar_blob_id=git_blob_id(bundle.sidecar_data))
        seeds.append(SeedBundle(bundle, files, row))
    return seeds


def defined_tasks(seeds: Sequence[SeedBundle]) -> TaskDefinitions:
    """A definition of every task of these bundles, as `bundler tasks define` writes one: the
    dataset and split they ran on, ranked by their first numeric metric, higher better."""
    tasks = {}
    for seed in seeds:
        row = seed.row
        if row.task_name not in tasks and row.dataset_split is not None:
            metric = next(m.name for m in row.metrics if m.number is not None)
            tasks[row.task_name] = TaskDefinition(
                hf_repo_id=row.hf_repo_id, split=row.dataset_split, metric=metric
            )
    return TaskDefinitions(tasks=tasks)


def repository_files(
    seeds: Sequence[SeedBundle], repo_id: str, definitions: TaskDefinitions | None = None
) -> dict[str, bytes]:
    """Every file of a repository holding these bundles: theirs, the maintainers' task
    `definitions` if given, and what a bundler commit derives from them: the tables and card,
    and the record vouching for them (bundler.hub.leaderboard.record)."""
    files = {path: data for seed in seeds for path, data in seed.files.items()}
    return files | board_files([seed.row for seed in seeds], repo_id, definitions)


def board_files(
    rows: Sequence[TableRow], repo_id: str, definitions: TaskDefinitions | None = None
) -> dict[str, bytes]:
    """What a bundler commit derives from these rows (every task's table written, every row
    read): the tables, the card, the task definitions if given, and the record."""
    files: dict[str, bytes] = {}
    tables = BranchTables("main", "0" * 40, AllTasksTable.of(rows))
    if definitions is not None:
        files[TASKS_FILE] = definitions.to_bytes()
        tables.definitions = definitions
    derived = tables.rendered(repo_id)
    vouched = {p: DerivedFile.of(d, p) for p, d in derived.items()}
    return files | derived | {RECORD: tables.record_of(vouched).to_bytes()}


def publish_directly(hub: HubServer, repo_id: str, bundles: Path) -> None:
    """The repository as the bundler's uploads of these bundles would have left it."""
    hub.create_repo(repo_id, files=repository_files(seed_bundles(bundles), repo_id))
