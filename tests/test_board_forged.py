"""The board is derived, whoever merged what (issue 36, item 1): a pull request from someone
without write access edits a part of the all-tasks table, a task table, a chart, the card and
the record, the record re-hashed to name the forged bytes; a maintainer merges it in the Hub's
web page. `card`, and an upload that comes after it, restore the board the verified bundles
give, at a cost in requests that does not grow with the board (measured at 300 and 3,000
bundles below).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from conftest import SUBMITTER_TOKEN, WRITE_TOKEN
from hubserver import Fault, HubServer
from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi
from test_board_incremental import (
    Board,
    assert_board_of_every_row,
    fresh_runner,
    parts_read,
    seeded,
)
from test_card_refresh import card
from test_upload import upload

from bundler.hub.client.remote import LastCommit
from bundler.hub.leaderboard.card_section import BEGIN, END
from bundler.hub.leaderboard.provenance import merged
from bundler.hub.leaderboard.record import BoardRecord, DerivedFile
from bundler.hub.repo.paths import README, RECORD, TABLES_DIR, table_part, task_chart, task_table

GHOST = "ghost-forged"
TASK = "task00"
"""The defined task: it has a chart."""


def board_bytes(hub: HubServer, repo_id: str) -> dict[str, bytes]:
    """Every table, chart and the card on main, the record left out."""
    files = {
        path: hub.file_bytes(repo_id, path) or b""
        for path in hub.list_files(repo_id)
        if path.startswith(f"{TABLES_DIR}/") or path == README
    }
    files.pop(RECORD)
    return files


def with_ghost(data: bytes) -> bytes:
    """A table (a part or a task table) with a ghost entry at the top: a copy of its first row
    under another name, scored 0.999."""
    table = pq.read_table(pa.BufferReader(data))
    rows = table.to_pylist()
    ghost = dict(rows[0])
    for column in ("bundle_id", "model_name", "player_name"):
        if column in ghost:
            ghost[column] = f"{GHOST}-{ghost[column]}"  # a well-formed bundle id
    for column in ("score", "ranking_score"):
        if column in ghost:
            ghost[column] = 0.999
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist([ghost, *rows], schema=table.schema), sink)
    return bytes(sink.getvalue().to_pybytes())


def forged_board(hub: HubServer, repo_id: str, part: int) -> dict[str, bytes]:
    """What the pull request writes: a ghost on `part` of the all-tasks table, on TASK's table,
    its chart and the card, and the record naming exactly those bytes, planned on main's head
    (as the bundler's own record would be)."""
    card_text = (hub.file_bytes(repo_id, README) or b"").decode()
    front, _, body = card_text.partition("\n---\n")
    forged = {
        table_part(part): with_ghost(hub.file_bytes(repo_id, table_part(part)) or b""),
        task_table(TASK): with_ghost(hub.file_bytes(repo_id, task_table(TASK)) or b""),
        task_chart(TASK): b"\x89PNG\r\n\x1a\n" + GHOST.encode(),
        README: f"{front}\n---\n\n**{GHOST}** is first on {TASK}.\n{body}".encode(),
    }
    record = BoardRecord.model_validate_json(hub.file_bytes(repo_id, RECORD) or b"")
    files = record.files | {path: DerivedFile.of(data) for path, data in forged.items()}
    head = hub.commits(repo_id)[0].oid
    return forged | {RECORD: record.model_copy(update={"files": files, "parent": head}).to_bytes()}


def merge_forged_pull_request(
    hub: HubServer, repo_id: str, part: int = 0, *, record: bool = True
) -> None:
    """The forged board proposed by a submitter (no write access), titled as the bundler titles
    its commits, and merged by a maintainer in the Hub's web page; without `record`, the
    record is deleted instead."""
    forged = forged_board(hub, repo_id, part)
    operations: list[CommitOperationAdd | CommitOperationDelete] = [
        CommitOperationAdd(path, data) for path, data in forged.items()
    ]
    if not record:
        del forged[RECORD]
        operations = [CommitOperationAdd(path, data) for path, data in forged.items()]
        operations.append(CommitOperationDelete(RECORD))
    proposed = HfApi(token=SUBMITTER_TOKEN).create_commit(
        repo_id,
        operations,
        commit_message="Add 1 statics bundle(s): m/task00@unpinned",
        repo_type="dataset",
        create_pr=True,
    )
    assert proposed.pr_num is not None
    HfApi(token=WRITE_TOKEN).merge_pull_request(repo_id, proposed.pr_num, repo_type="dataset")
    assert all(hub.file_bytes(repo_id, path) == data for path, data in forged.items())
    assert hub.commits(repo_id)[0].summary.endswith(f"(#{proposed.pr_num})")


def assert_no_ghost(hub: HubServer, repo_id: str) -> None:
    for path, data in board_bytes(hub, repo_id).items():
        assert GHOST.encode() not in data, path


def test_card_and_the_next_upload_restore_the_board_after_a_forged_merge(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    board = seeded(hub, repo_id, tmp_path)  # three parts: the forged one is not the last
    honest = board_bytes(hub, repo_id)
    merge_forged_pull_request(hub, repo_id, part=0)
    fresh_runner()
    since = len(hub.request_log)
    code, result, stderr = card(repo_id)
    assert code == 0, stderr
    assert set(result["changed_files"]) == {
        table_part(0),
        task_table(TASK),
        task_chart(TASK),
        README,
        RECORD,
    }
    assert parts_read(hub, since) == {table_part(0)}  # as the last bundler commit wrote it
    assert board_bytes(hub, repo_id) == honest
    assert card(repo_id)[1]["changed"] is False

    merge_forged_pull_request(hub, repo_id, part=0)  # again, and then an upload
    fresh_runner()
    new = tmp_path / "new"
    board.new[0].copy_to(new)
    code, _, stderr = upload(new, "--repo", repo_id)
    assert code == 0, stderr
    assert_no_ghost(hub, repo_id)
    assert_board_of_every_row(hub, board, board.rows + 1)


def test_a_merged_pull_request_that_only_rewrites_the_record_vouches_for_nothing(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    """The record alone, naming the bytes the branch holds but with other tallies: the record
    of the commit before the merge is the one believed."""
    board = seeded(hub, repo_id, tmp_path, synthetic=300)
    record = json.loads(hub.file_bytes(repo_id, RECORD) or b"")
    record["tasks"][TASK]["total"] += 1_000
    proposed = HfApi(token=SUBMITTER_TOKEN).create_commit(
        repo_id,
        [CommitOperationAdd(RECORD, json.dumps(record).encode())],
        commit_message="Regenerate: the leaderboard tables and card",
        repo_type="dataset",
        create_pr=True,
    )
    assert proposed.pr_num is not None
    HfApi(token=WRITE_TOKEN).merge_pull_request(repo_id, proposed.pr_num, repo_type="dataset")
    code, result, stderr = card(repo_id)
    assert code == 0, stderr
    assert result["bundle_count"] == board.rows
    assert result["changed_files"] == [RECORD]
    assert_board_of_every_row(hub, board, board.rows)


def requests_after_a_forged_merge(hub: HubServer, board: Board, tmp_path: Path) -> list[int]:
    """The requests of `card` after a forged merge, then of an upload of one bundle after
    another, each from a runner with no local copy of the tables. The forged part is the last:
    the one an upload reads anyway, whatever the size."""
    counts = []
    last = max(int(p[-13:-8]) for p in board_bytes(hub, board.repo_id) if "/part-" in p)
    for command in ("card", "upload"):
        merge_forged_pull_request(hub, board.repo_id, part=last)
        fresh_runner()
        since = len(hub.request_log)
        if command == "card":
            code, _, stderr = card(board.repo_id)
        else:
            new = tmp_path / f"new-{board.rows}"
            board.new[0].copy_to(new)
            code, _, stderr = upload(new, "--repo", board.repo_id)
        assert code == 0, stderr
        counts.append(len(hub.request_log) - since)
        assert_no_ghost(hub, board.repo_id)
    assert_board_of_every_row(hub, board, board.rows + 1)
    return counts


def test_restoring_the_board_costs_the_same_requests_at_300_3000_and_6000_bundles(
    hub: HubServer, tmp_path: Path
) -> None:
    counts = {
        size: requests_after_a_forged_merge(
            hub, seeded(hub, f"gptnt/forged-{size}", tmp_path / str(size), synthetic=size), tmp_path
        )
        for size in (300, 3_000, 6_000)
    }
    print(f"requests (card after a forged merge, upload of 1 after another): {counts}")
    assert counts[3_000] == counts[6_000]
    # At 300 bundles the table is one part: `card` and the upload rank from it rather than
    # from the two task tables (AllTasksTable.boards reads whichever is fewer), and read two
    # files fewer. (The upload once seemed to cost the same at each size: its chart said "of
    # 500 entries", the rows read, at 3,000 and 6,000, so it was the same bytes, never sent.)
    # The Hub keeps tables in LFS: at 3,000 and 6,000 the task's table the upload writes back
    # is, byte for byte, the one before the forged merge (the new bundle is not among the
    # task's best), whose blob the Hub holds; at 300 it is new, one LFS upload more (its PUT
    # and verify), which makes up for the two reads.
    assert [a - b for a, b in zip(counts[3_000], counts[300], strict=True)] == [2, 0]


def test_forged_merges_in_a_row_are_all_passed_over(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    """Each merge over the record is passed over, back to the bundler's commit before them."""
    board = seeded(hub, repo_id, tmp_path, synthetic=300)
    honest = board_bytes(hub, repo_id)
    merge_forged_pull_request(hub, repo_id)
    merge_forged_pull_request(hub, repo_id)
    code, result, stderr = card(repo_id)
    assert code == 0, stderr
    assert result["bundle_count"] == board.rows
    assert board_bytes(hub, repo_id) == honest


def test_a_hub_that_cannot_list_the_commits_is_tried_again_later(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    """Without the commit listing nothing says whose the record is: the run stops, exit 75,
    and nothing is committed."""
    seeded(hub, repo_id, tmp_path, synthetic=300)
    merge_forged_pull_request(hub, repo_id)
    head = hub.commits(repo_id)[0].oid
    hub.inject("GET", rf"{repo_id}/commits/", Fault.status(503), times=50)
    code, _, stderr = card(repo_id)
    hub.clear_faults()
    assert code == 75, stderr
    assert hub.commits(repo_id)[0].oid == head


def test_a_merged_pull_request_that_deletes_the_record_is_passed_over_too(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    """The record deleted with the forged tables: the record before the merge is believed,
    and only what the merge edited is read."""
    board = seeded(hub, repo_id, tmp_path)
    honest = board_bytes(hub, repo_id)
    merge_forged_pull_request(hub, repo_id, part=0, record=False)
    assert hub.file_bytes(repo_id, RECORD) is None
    fresh_runner()
    since = len(hub.request_log)
    code, result, stderr = card(repo_id)
    assert code == 0, stderr
    assert result["bundle_count"] == board.rows
    assert parts_read(hub, since) == {table_part(0)}
    assert board_bytes(hub, repo_id) == honest
    assert hub.file_bytes(repo_id, RECORD) is not None


def test_only_the_title_the_hub_gives_a_merge_marks_one() -> None:
    """The Hub ends a merge's title with the pull request's number; the bundler's own titles
    (review's merge included) never end so."""
    when = datetime(2026, 1, 1, tzinfo=UTC)
    titles = {
        "Add 1 statics bundle(s): m/task00@unpinned (#12)": True,
        "Regenerate: the leaderboard tables and card (#3)  ": True,
        "Merge PR #3: 2 reviewed bundle(s)": False,
        "Add 1 statics bundle(s) (#3) and more": False,
        "Regenerate: the leaderboard tables and card (4 bundle(s))": False,
    }
    for title, merge in titles.items():
        assert merged(LastCommit("0" * 40, when, title)) is merge, title


def test_a_merge_that_writes_board_markers_into_the_card_does_not_make_its_text_the_owners(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    """The card of a board that owns it whole, rewritten in a merged pull request as a card
    shared with an owner (`init --adopt`'s markers around the board, a ghost outside them):
    the next `card` writes the whole card again, and the record does not call it shared."""
    seeded(hub, repo_id, tmp_path, synthetic=300)
    honest = hub.file_bytes(repo_id, README) or b""
    front, _, body = honest.decode().partition("\n---\n")
    forged = (
        f"{front}\n---\n\n**{GHOST}** is first on every board.\n\n{BEGIN}\n{body}\n{END}\n"
    ).encode()
    proposed = HfApi(token=SUBMITTER_TOKEN).create_commit(
        repo_id,
        [CommitOperationAdd(README, forged)],
        commit_message="Regenerate: the leaderboard tables and card",
        repo_type="dataset",
        create_pr=True,
    )
    assert proposed.pr_num is not None
    HfApi(token=WRITE_TOKEN).merge_pull_request(repo_id, proposed.pr_num, repo_type="dataset")
    fresh_runner()
    code, result, stderr = card(repo_id)
    assert code == 0, stderr
    assert README in result["changed_files"]
    assert hub.file_bytes(repo_id, README) == honest
    record = BoardRecord.model_validate_json(hub.file_bytes(repo_id, RECORD) or b"")
    assert not record.card_shared
