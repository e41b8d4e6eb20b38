"""`bundler audit` checks everything the board publishes, end to end against the local Hub
server: a task table and card forged consistently with the record and merged in the web page;
a small part holding one row a million times (refused fast, in little memory); a row held
twice; a board of 3,000 empty parts read under a rate limit, where the second run resumes. And
the bounds a table is checked against before it is decoded (bundler.hub.audit.parts)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from benchlib import BUNDLER, run_measured
from conftest import WRITE_TOKEN
from factory import RunSpec
from helpers import cli_env
from hubserver import HubServer, RateLimits
from huggingface_hub import CommitOperationAdd, HfApi
from scalelib import bundles_of, repository_files, seed_bundles
from test_audit import audit, kinds, table, with_rows
from test_card_refresh import card_text, commit_by_hand
from test_upload import make_bundles, publish

from bundler.hub.audit.parts import table_problem
from bundler.hub.leaderboard.columns import parquet_bytes
from bundler.hub.leaderboard.record import BoardRecord, DerivedFile
from bundler.hub.leaderboard.tables import ALL_SCHEMA, PART_ROWS
from bundler.hub.repo.paths import README, RECORD, repo_archive, table_part, task_table
from bundler.local.layout import BundleId

GHOST = "ghost_00000000/alpha@unpinned"


@pytest.fixture
def published(repo_id: str, tmp_path: Path) -> Path:
    """A board of three tasks, one bundle each, as uploads leave it."""
    specs = [RunSpec(task=task, model=f"m-{task}", rows=2) for task in ("alpha", "beta", "gamma")]
    publish(bundles := make_bundles(tmp_path / "published", specs), repo_id)
    return bundles


def merged_in_the_web_page(repo_id: str, files: dict[str, bytes]) -> None:
    """A pull request editing `files`, merged by a maintainer in the Hub's web page."""
    api = HfApi(token=WRITE_TOKEN)
    opened = api.create_commit(
        repo_id,
        [CommitOperationAdd(path, data) for path, data in files.items()],
        commit_message="a better score",
        repo_type="dataset",
        create_pr=True,
    )
    assert opened.pr_num is not None
    api.merge_pull_request(repo_id, opened.pr_num, repo_type="dataset")


def ghost_first(data: bytes) -> bytes:
    """A task table with a ghost bundle put first, its schema and metadata kept."""
    original = pq.read_table(pa.BufferReader(data))
    rows = original.to_pylist()
    ghost = dict(rows[0], bundle_id=GHOST, player_name="ghost", model_name="ghost", rank=1)
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist([ghost, *rows], schema=original.schema), sink)
    return bytes(sink.getvalue().to_pybytes())


def ghost_on_the_card(card: str, repo_id: str, real: BundleId) -> str:
    """The card with the ghost's line put above the real bundle's on alpha's board."""
    link = f"datasets/{repo_id}/blob/main/{repo_archive(real)}"
    lines = card.splitlines(keepends=True)
    (at,) = [n for n, line in enumerate(lines) if link in line]
    forged = lines[at].replace(repo_archive(real), repo_archive(BundleId.parse(GHOST)))
    return "".join([*lines[:at], forged.replace("m-alpha", "ghost"), *lines[at:]])


def test_a_task_table_and_card_forged_with_the_record_and_merged_are_found(
    hub: HubServer, repo_id: str, published: Path
) -> None:
    alpha = task_table("alpha")
    forged_table = ghost_first(hub.file_bytes(repo_id, alpha) or b"")
    (real,) = [BundleId.parse(str(i)) for i in table(hub, repo_id)["bundle_id"].to_pylist()[:1]]
    forged_card = ghost_on_the_card(card_text(hub, repo_id), repo_id, real).encode()
    record = BoardRecord.parse(hub.file_bytes(repo_id, RECORD) or b"")
    assert record is not None
    record.files[alpha], record.files[README] = (
        DerivedFile.of(forged_table),
        DerivedFile.of(forged_card),
    )
    forged = {alpha: forged_table, README: forged_card, RECORD: record.to_bytes()}
    merged_in_the_web_page(repo_id, forged)
    code, report, stderr = audit(repo_id)
    assert code == 1, stderr
    assert kinds(report) == [
        ("task-table-differs", GHOST, None),
        ("card-differs", GHOST, None),
    ]
    on_table, on_card = report["findings"]
    assert on_table["path"] == alpha
    assert on_table["detail"].endswith("no part of the all-tasks table holds it")
    assert on_card["path"] == README and "no table gives it" in on_card["detail"]
    assert "ghost" in (on_card["published"] or "")
    assert GHOST in stderr


def one_row_many_times(row: dict[str, Any], times: int) -> bytes:
    """A part holding `row` `times` times: a few hundred KB of Parquet, gigabytes decoded."""
    one = pa.Table.from_pylist([row], schema=ALL_SCHEMA)
    thousand = pa.concat_tables([one] * 1000).combine_chunks()
    many = pa.concat_tables([thousand] * (times // 1000))
    sink = pa.BufferOutputStream()
    pq.write_table(many, sink, compression="zstd", row_group_size=times)
    return bytes(sink.getvalue().to_pybytes())


def test_a_small_part_holding_a_row_a_million_times_is_refused_fast_in_little_memory(
    hub: HubServer, repo_id: str, published: Path
) -> None:
    row = pq.read_table(pa.BufferReader(hub.file_bytes(repo_id, table_part(0)) or b""))
    bomb = one_row_many_times(row.to_pylist()[0], 1_000_000)
    assert len(bomb) < 400_000
    commit_by_hand(repo_id, {table_part(1): bomb})
    ran = run_measured(
        [str(BUNDLER), "audit", "--repo", repo_id, "--json"],
        env=cli_env({"HF_TOKEN": ""}),
        capture=True,
    )
    assert ran.exit_code == 1, ran.stderr
    assert "Traceback" not in ran.stderr and "MemoryError" not in ran.stderr
    report = json.loads(ran.stdout)
    (refused,) = [f for f in report["findings"] if f["kind"] == "unreadable-table"]
    assert refused["path"] == table_part(1)
    assert "1,000,000 rows; the bundler writes at most 1,000" in refused["detail"]
    assert report["rows_published"] == 3
    assert ran.peak_rss_kib < 400 * 1024 and ran.seconds < 60, (ran.peak_rss_kib, ran.seconds)


def test_a_row_held_twice_is_a_finding(hub: HubServer, repo_id: str, published: Path) -> None:
    original = table(hub, repo_id)
    rows = original.to_pylist()
    commit_by_hand(
        repo_id,
        {
            table_part(0): with_rows(original, [rows[0], *rows]),
            table_part(1): with_rows(original, [rows[1]]),
        },
    )
    code, report, stderr = audit(repo_id)
    assert code == 1, stderr
    assert report["rows_published"] == 3
    twice = [(f["bundle_id"], f["path"], f["detail"]) for f in report["findings"]]
    assert [f for f in twice if "the all-tasks table holds this bundle's row" in f[2]] == [
        (rows[0]["bundle_id"], table_part(0), twice[0][2]),
        (rows[1]["bundle_id"], table_part(0), twice[1][2]),
    ]
    assert "twice in this part" in twice[0][2]
    assert "in this part and another part" in twice[1][2]
    assert [f["kind"] for f in report["findings"]] == ["duplicate-row"] * 2


EMPTY_PARTS = 3000


def test_a_board_of_3000_empty_parts_under_a_rate_limit_resumes_on_the_next_run(
    hub: HubServer, tmp_path: Path
) -> None:
    repo_id = "gptnt/empty-parts-" + tmp_path.name[-8:]
    seeds = seed_bundles(
        bundles_of(tmp_path, [RunSpec(task="alpha", model=f"m{n}", rows=2) for n in range(3)])
    )
    empty = parquet_bytes(ALL_SCHEMA.empty_table())
    files = repository_files(seeds, repo_id)
    files |= {table_part(number): empty for number in range(1, EMPTY_PARTS + 1)}
    hub.create_repo(repo_id, files=files)
    hub.enable_rate_limits(RateLimits(anonymous_resolvers=2000))
    code, report, stderr = audit(repo_id, "--sample", 1, "--max-wait", 0)
    assert code == 75, stderr
    assert report["error_kind"] == "rate-limit-outlasts-wait"
    first = hub.request_counts(repo_id)["file"]  # the bundle's 2, parts, and the one refused
    assert 2 < first < EMPTY_PARTS
    hub.advance_clock(hub.seconds_to_window_reset())
    hub.reset_requests()
    code, report, stderr = audit(repo_id, "--sample", 1, "--max-wait", 0)
    assert code == 0, stderr
    assert [b["cached"] for b in report["audited"]] == [True]  # judged before any part
    assert report["rows_published"] == 3
    # every part but those the first run downloaded
    parts = EMPTY_PARTS + 1
    assert report["file_requests"] == hub.request_counts(repo_id)["file"] == parts - (first - 3)


def dictionary_bomb(rows: int, value_bytes: int) -> bytes:
    """A column of `rows` references to one value of `value_bytes`: written as a dictionary,
    the file holds the value once; decoded, `rows` times."""
    column = pa.DictionaryArray.from_arrays(
        pa.array([0] * rows, pa.int32()), pa.array(["x" * value_bytes])
    )
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"metrics_json": column}), sink, compression="zstd")
    return bytes(sink.getvalue().to_pybytes())


def test_what_a_table_decodes_to_is_bounded_before_it_is_decoded() -> None:
    bomb = dictionary_bomb(1000, 512 << 10)
    assert len(bomb) < 100_000
    problem = table_problem(bomb, PART_ROWS)
    assert problem is not None and "its rows decode to 524," in problem, problem
    assert table_problem(dictionary_bomb(1000, 100), PART_ROWS) is None
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"bundle_id": ["a"] * 10}), sink, row_group_size=5)
    assert table_problem(bytes(sink.getvalue().to_pybytes()), PART_ROWS) == (
        "it holds 2 row groups; the bundler writes 1"
    )
    assert (table_problem(b"PAR1 no table", PART_ROWS) or "").startswith("not a Parquet table")
