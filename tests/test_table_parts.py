"""A leaderboard whose all-tasks table is one file, as the release before parts wrote it (a
record of format 2 vouching for `leaderboard/bundles.parquet`), is split into parts by the next
commit: its rows taken from the vouched table, every row scored by its task, no bundle
downloaded, and the one file removed."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
from factory import RunSpec
from helpers import published_leaderboard
from hubserver import HubServer
from test_card_refresh import card
from test_upload import make_bundles, publish

from bundler.hub.leaderboard.columns import cells_of, parquet_bytes
from bundler.hub.leaderboard.record import DerivedFile
from bundler.hub.leaderboard.tables import LAYOUT_2_SCHEMA, LAYOUT_KEY
from bundler.hub.repo.paths import ALL_TABLE, README, RECORD, part_number, table_part, task_table

SCORED = ("ranking_metric", "score", "stale", "ci_low", "ci_high")


def one_file_table(hub: HubServer, repo_id: str) -> bytes:
    """The branch's rows as the release before parts wrote them: one file of layout 2, run
    dates as text, no signer, no stale flag or interval, scores as its boards gave them."""
    rows = published_leaderboard(hub, repo_id).rows()
    cells = []
    for row in rows:
        cell = cells_of(row)
        cell["run_date"] = row.run_date
        cells.append({name: cell[name] for name in LAYOUT_2_SCHEMA.names})
    schema = LAYOUT_2_SCHEMA.with_metadata({LAYOUT_KEY: b"2"})
    return parquet_bytes(pa.Table.from_pylist(cells, schema=schema))


def test_a_table_in_one_file_is_split_into_parts_with_no_bundle_read(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    specs = [RunSpec(task=task, model=f"m{n}", rows=2) for n in range(3) for task in ("a", "b")]
    publish(make_bundles(tmp_path / "bundles", specs), repo_id)
    before = published_leaderboard(hub, repo_id).rows()
    files = {path: hub.file_bytes(repo_id, path) or b"" for path in hub.list_files(repo_id)}
    files = {path: data for path, data in files.items() if part_number(path) is None}
    files[ALL_TABLE] = one_file_table(hub, repo_id)
    vouched = [ALL_TABLE, README, task_table("a"), task_table("b")]
    derived = {path: DerivedFile.of(files[path]).model_dump() for path in vouched}
    record = {"format": 2, "parent": "0" * 40, "files": derived, "left_off": {}}
    files[RECORD] = json.dumps(record).encode()
    old = f"{repo_id}-old"
    hub.create_repo(old, files=files)
    hub.reset_requests()
    code, result, stderr = card(old)
    assert code == 0, stderr
    assert result["changed"] is True
    archives = [r for r in hub.requests(old) if r.path.endswith(".tar.zst")]
    assert archives == []  # the vouched table was split: no bundle read
    (commit, *_) = hub.commits(old)
    assert ALL_TABLE in commit.deleted and table_part(0) in commit.added
    after = published_leaderboard(hub, old).rows()
    unscored = [row.model_dump(exclude={*SCORED, "signer_fingerprint"}) for row in after]
    assert unscored == [row.model_dump(exclude={*SCORED, "signer_fingerprint"}) for row in before]
    scored = [row.model_dump(include=set(SCORED)) for row in after]
    assert scored == [row.model_dump(include=set(SCORED)) for row in before]
    again, report, _ = card(old)
    assert again == 0 and report["changed"] is False  # and now it is true
