"""Leaderboards of any size on the local Hub server, for the request budgets (tests/test_budgets.py)
and the scale benchmark (tests/benchmark_scale.py).

A repository of N bundles is laid out as the bundler lays it out (layout 3: every bundle's
archive and sidecar in its shard, the tables derived from the sidecars, the card, the record of
them, bundler.hub.repo.paths) and put on the server in
one commit, without HTTP, so that building N = 3,000 takes seconds, not an hour of uploads. The
bundles are real: collected from runs written by the project's own tree writer, so a command
that reads one (verify, extend, download) reads what `collect` wrote.
"""

from __future__ import annotations

from pathlib import Path

from factory import RunSpec, write_tree
from hubserver import HubServer

from bundler.core.progress import NoProgress
from bundler.hub.client.remote import git_blob_id
from bundler.hub.leaderboard.card import render_dataset_card
from bundler.hub.leaderboard.ranking import TaskBoard
from bundler.hub.leaderboard.record import BoardRecord, DerivedFile
from bundler.hub.leaderboard.rows import TableRow, build_row
from bundler.hub.leaderboard.tables import AllTasksTable, task_table_bytes
from bundler.hub.publish.upload import gather_local
from bundler.hub.repo.paths import (
    ALL_TABLE,
    README,
    RECORD,
    repo_archive,
    repo_paths,
    repo_sidecar,
    task_table,
)
from bundler.local.collect import CollectOptions, collect

TASKS = 10
PREDICTIONS = 3
PUBLISHED_AT = "2026-11-01T10:00:00Z"


def run_specs(n: int, *, start: int = 0, tasks: int = TASKS) -> list[RunSpec]:
    """N runs of PREDICTIONS predictions each: `tasks` tasks, a player setup per N/tasks."""
    return [
        RunSpec(
            task=f"task{index % tasks:02d}",
            model=f"model-{index // tasks:05d}",
            rows=PREDICTIONS,
            thoughts_chars=40,
            metrics={"exact_match": {"accuracy": (index % 97) / 97, "n": PREDICTIONS}},
        )
        for index in range(start, start + n)
    ]


def bundles_of(root: Path, specs: list[RunSpec]) -> Path:
    """The runs of `specs` written under `root` and collected into `root/bundles`."""
    write_tree(root / "output", specs, how_do_you=False)
    expected = {spec.task: spec.rows for spec in specs}
    report = collect(root / "output", root / "bundles", CollectOptions(expected_rows=expected))
    assert not report.refused, report.refused[:3]
    return root / "bundles"


def repository_files(folder: Path, repo_id: str) -> dict[str, bytes]:
    """Every file of a repository holding the bundles of a local folder."""
    local, set_aside = gather_local(folder, allow_partial=True, progress=NoProgress())
    assert not set_aside, set_aside[:3]
    files: dict[str, bytes] = {}
    bundles: set[str] = set()
    rows: list[TableRow] = []
    for bundle in local:
        files[repo_archive(bundle.key)] = bundle.archive.read_bytes()
        files[repo_sidecar(bundle.key)] = bundle.sidecar_data
        bundles.update(repo_paths(bundle.key))
        row = build_row(bundle.sidecar, bundle.metrics_text, PUBLISHED_AT)
        rows.append(TableRow(**row.model_dump(), sidecar_blob_id=git_blob_id(bundle.sidecar_data)))
    leaderboard = AllTasksTable.of(rows)
    boards = [TaskBoard.of(task, leaderboard.rows(task)) for task in leaderboard.tasks()]
    files[ALL_TABLE] = leaderboard.bytes()
    files.update((task_table(board.task), task_table_bytes(board)) for board in boards)
    files[README] = render_dataset_card(repo_id, boards, len(leaderboard)).encode("utf-8")
    derived = {path: DerivedFile.of(data) for path, data in files.items() if path not in bundles}
    files[RECORD] = BoardRecord(parent="0" * 40, files=derived).to_bytes()
    return files


def publish_directly(hub: HubServer, repo_id: str, bundles: Path) -> None:
    """The repository as the bundler's uploads of these bundles would have left it."""
    hub.create_repo(repo_id, files=repository_files(bundles, repo_id))
