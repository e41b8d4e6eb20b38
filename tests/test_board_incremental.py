"""A commit that only adds bundles reads the all-tasks table's last part and the task tables,
never the other parts, and writes exactly the board that every row would give: the same task
tables and card, every row scored as settling all of them would score it. So an upload of one
bundle, or `card` after a merge in the Hub's web page, costs the same at 300 bundles as at
100,000 (tests/benchmark_scale.py measures it).

The repository holds a few real bundles and the rows of 2,100 more (three parts of the table,
more parts than tasks: below that, reading every part costs no more requests than the task
tables, and the bundler reads them). Those rows have no files on the Hub: a commit that only
adds bundles never reads them, which is the point. One task is defined by the maintainers, the
other ranked by its first numeric metric, as the record says.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from conftest import HF_HOME, SUBMITTER_TOKEN, WRITE_TOKEN
from helpers import published_leaderboard
from hubserver import HubServer
from huggingface_hub import HfApi
from scalelib import SeedBundle, board_files, bundles_of, defined_tasks, run_specs, seed_bundles
from test_card_refresh import card
from test_upload import upload

from bundler.hub.leaderboard.branch import BranchTables
from bundler.hub.leaderboard.record import BoardRecord
from bundler.hub.leaderboard.rows import TableRow
from bundler.hub.leaderboard.tablecache import CACHE_FOLDER
from bundler.hub.leaderboard.tables import AllTasksTable
from bundler.hub.repo.paths import RECORD, part_number, table_part, task_table
from bundler.hub.tasks.definitions import TaskDefinitions
from bundler.local.layout import BundleId
from bundler.local.metrics import flatten_metrics

SYNTHETIC = 2_100
SCORED = ("ranking_metric", "score", "stale", "ci_low", "ci_high")


@dataclass(frozen=True)
class Board:
    repo_id: str
    definitions: TaskDefinitions
    new: list[SeedBundle]
    """Real bundles the repository does not hold yet, two per task."""
    rows: int
    """The rows the repository's table holds."""


def synthetic_rows(template: TableRow, count: int, start: int) -> list[TableRow]:
    """Rows like `template`'s, each of its own player and score."""
    key = BundleId.parse(template.bundle_id)
    fingerprint = key.player_dir.rpartition("_")[2]
    rows = []
    for index in range(start, start + count):
        metrics = {"exact_match": {"accuracy": (index * 37 % 101) / 101, "n": 3}}
        cells = template.model_dump() | {
            "bundle_id": f"synthetic-{index:05d}_{fingerprint}/{key.target}",
            "model_name": f"synthetic-{index:05d}",
            "player_name": f"synthetic-{index:05d}",
            "metrics_json": json.dumps(metrics),
        }
        cells.pop("metrics")
        rows.append(TableRow(**cells, metrics=flatten_metrics(metrics)))
    return rows


def seeded(
    hub: HubServer,
    repo_id: str,
    tmp_path: Path,
    *,
    tallied: bool = True,
    synthetic: int = SYNTHETIC,
) -> Board:
    """The repository: two real bundles (one per task), the rows of `synthetic` more, task00
    defined; with `tallied` False, its record is an older version's (no tallies)."""
    seeds = seed_bundles(bundles_of(tmp_path / "real", run_specs(6, tasks=2)))
    held, new = seeds[:2], seeds[2:]
    rows = [seed.row for seed in held]
    for number, seed in enumerate(held):
        rows += synthetic_rows(seed.row, synthetic // 2, number * synthetic)
    everything = defined_tasks(seeds)
    definitions = TaskDefinitions(tasks={"task00": everything.tasks["task00"]})
    files = {path: data for seed in held for path, data in seed.files.items()}
    files |= board_files(rows, repo_id, definitions)
    if not tallied:
        record = json.loads(files[RECORD])
        del record["tasks"]
        files[RECORD] = json.dumps(record).encode()
    hub.create_repo(repo_id, files=files)
    return Board(repo_id, definitions, new, len(rows))


def parts_read(hub: HubServer, since: int) -> set[str]:
    """The parts of the all-tasks table downloaded since the request log held `since`."""
    paths = {f"leaderboard/{r.path.partition('/leaderboard/')[2]}" for r in hub.request_log[since:]}
    return {path for path in paths if part_number(path) is not None}


def fresh_runner() -> None:
    """No local copy of the tables: each part the next command needs is downloaded."""
    shutil.rmtree(Path(HF_HOME, *CACHE_FOLDER), ignore_errors=True)


def assert_board_of_every_row(hub: HubServer, board: Board, count: int) -> None:
    """The branch's task tables and card are those every row on it gives, and each row is
    scored as settling every row scores it."""
    found = published_leaderboard(hub, board.repo_id).rows()
    assert len(found) == count
    expected = BranchTables("main", "0" * 40, AllTasksTable.of(found))
    expected.definitions = board.definitions
    derived = expected.rendered(board.repo_id)
    for path, data in derived.items():
        if part_number(path) is None:  # the parts hold rows in the order they came
            assert hub.file_bytes(board.repo_id, path) == data, path
    settled = {row.bundle_id: row for row in expected.leaderboard.rows()}
    for row in found:
        want = settled[row.bundle_id]
        assert [getattr(row, f) for f in SCORED] == [getattr(want, f) for f in SCORED]
    record = BoardRecord.parse(hub.file_bytes(board.repo_id, RECORD) or b"")
    assert record is not None and record.tasks == expected.leaderboard.tallies()


@pytest.fixture
def board(hub: HubServer, repo_id: str, tmp_path: Path) -> Board:
    return seeded(hub, repo_id, tmp_path)


def test_an_upload_of_new_bundles_reads_the_last_part_alone(
    hub: HubServer, board: Board, tmp_path: Path
) -> None:
    new = tmp_path / "new"
    for seed in board.new[:2]:  # one of each task
        seed.copy_to(new)
    fresh_runner()
    since = len(hub.request_log)
    code, report, stderr = upload(new, "--repo", board.repo_id)
    assert code == 0, stderr
    assert [b["outcome"] for b in report["bundles"]] == ["published", "published"]
    assert parts_read(hub, since) == {table_part(2)}
    assert_board_of_every_row(hub, board, board.rows + 2)


def test_card_after_a_web_page_merge_of_new_bundles_reads_the_last_part_alone(
    hub: HubServer, board: Board, tmp_path: Path
) -> None:
    proposed = tmp_path / "proposed"
    board.new[0].copy_to(proposed)
    code, report, stderr = upload(
        proposed, "--repo", board.repo_id, "--create-pr", token=SUBMITTER_TOKEN
    )
    assert code == 0, stderr
    HfApi(token=WRITE_TOKEN).merge_pull_request(
        board.repo_id, report["pull_request_num"], repo_type="dataset"
    )
    fresh_runner()
    since = len(hub.request_log)
    code, result, stderr = card(board.repo_id)
    assert code == 0, stderr
    assert result["changed"] is True and result["bundle_count"] == board.rows + 1
    assert parts_read(hub, since) == {table_part(2)}
    assert_board_of_every_row(hub, board, board.rows + 1)


def test_a_replaced_bundle_is_ranked_from_every_row(
    hub: HubServer, board: Board, tmp_path: Path
) -> None:
    """A bundle published again with other results may leave its task's best rows: the
    commit reads every part, and the board is still that of every row."""
    first, again = tmp_path / "first", tmp_path / "again"
    board.new[0].copy_to(first)
    assert upload(first, "--repo", board.repo_id)[0] == 0
    [spec] = run_specs(1, start=2, tasks=2)  # board.new[0]'s run, with another score
    better = replace(spec, metrics={"exact_match": {"accuracy": 0.999, "n": 3}})
    seed_bundles(bundles_of(tmp_path / "better", [better]))[0].copy_to(again)
    code, _, stderr = upload(again, "--repo", board.repo_id, "--replace")
    assert code == 0, stderr
    assert_board_of_every_row(hub, board, board.rows + 1)


def test_a_record_of_no_tallies_has_every_task_table_written_again(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    """A board an older version wrote: its first upload reads every part, derives every
    task's table again (an older one lacks the flat `ranking_score` the next commits rank
    by) and writes the record's tallies; the next upload reads the last part alone."""
    board = seeded(hub, repo_id, tmp_path, tallied=False)
    first, second = tmp_path / "first", tmp_path / "second"
    board.new[0].copy_to(first)
    board.new[1].copy_to(second)
    since = len(hub.request_log)
    assert upload(first, "--repo", repo_id)[0] == 0
    assert parts_read(hub, since) == {table_part(n) for n in range(3)}
    record = BoardRecord.parse(hub.file_bytes(repo_id, RECORD) or b"")
    assert record is not None and record.tasks is not None
    assert {task_table("task00"), task_table("task01")} <= record.files.keys()
    fresh_runner()
    since = len(hub.request_log)
    assert upload(second, "--repo", repo_id)[0] == 0
    assert parts_read(hub, since) == {table_part(2)}
    assert_board_of_every_row(hub, board, board.rows + 2)
