"""The board for people, end to end against the test Hub: bundles collected, one signed, and
published by upload; then the card on the Hub names each bundle's model, submitter, run date
and signer with a link to the bundle, shows one overview across the tasks, and the tables
hold the run date as a microsecond timestamp with its text to the nanosecond beside it, the
signer's fingerprint and a stale column, as pyarrow alone reads them."""

from __future__ import annotations

import base64
import hashlib
import re
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
)
from factory import RunSpec
from helpers import all_tasks_table
from hubserver import HubServer
from test_upload import make_bundles, publish

from bundler.hub.repo.paths import README, task_table
from bundler.local.sign import sign
from bundler.local.submitter import Submitter

RUN_DATE = "2026-06-15T12:42:22.045588909+02:00"
"""A run date with nanoseconds and an offset: the tables hold its instant to the microsecond,
and its text to the nanosecond."""
RUN_NANOSECONDS = (
    int(
        (
            datetime(2026, 6, 15, 10, 42, 22, tzinfo=UTC) - datetime(1970, 1, 1, tzinfo=UTC)
        ).total_seconds()
    )
    * 10**9
    + 45_588_909
)
SCORES = {
    ("expert-vqa", "gpt-5.2"): 0.9,
    ("expert-vqa", "Qwen/Qwen3.5-27B"): 0.6,
    ("expert-vqa", "claude"): 0.7,
    ("maze", "gpt-5.2"): 0.2,
    ("maze", "Qwen/Qwen3.5-27B"): 0.8,
}
"""Each (task, model)'s exact_match.accuracy; claude ran expert-vqa only."""


@pytest.fixture
def board(hub: HubServer, repo_id: str, tmp_path: Path) -> tuple[str, str]:
    """The published repository's card, and the fingerprint of the key that signed gpt-5.2's
    expert-vqa bundle (worked out here from the public key, as `ssh-keygen -l` does)."""
    specs = [
        RunSpec(task=task, model=model, rows=4, run_date=RUN_DATE,
                metrics={"exact_match": {"accuracy": score}})
        for (task, model), score in SCORES.items()
    ]  # fmt: skip
    bundles = make_bundles(tmp_path, specs, submitter=Submitter(name="Ada Lovelace"))
    private = Ed25519PrivateKey.generate()
    key = tmp_path / "key"
    key.write_bytes(private.private_bytes(Encoding.PEM, PrivateFormat.OpenSSH, NoEncryption()))
    (signed,) = [a for a in bundles.rglob("expert-vqa@*.tar.zst") if "gpt-5-2" in str(a)]
    assert sign([signed], key).exit_code == 0
    publish(bundles, repo_id)
    public = private.public_key().public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH).split()[1]
    digest = base64.b64encode(hashlib.sha256(base64.b64decode(public)).digest()).decode()
    card = (hub.file_bytes(repo_id, README) or b"").decode()
    return card, "SHA256:" + digest.rstrip("=")


def table(hub: HubServer, repo_id: str, path: str) -> pa.Table:
    data = hub.file_bytes(repo_id, path)
    assert data is not None, path
    return pq.read_table(pa.BufferReader(data))


def cells(line: str) -> list[str]:
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]]


def board_lines(card: str, task: str) -> dict[str, list[str]]:
    """A board's lines by model name (its second column)."""
    after = card.split(f"\n### {task}\n\n", 1)[1].split("\n\n", 1)[0]
    rows = [cells(line) for line in after.splitlines()[2:]]
    return {row[1]: row for row in rows}


def test_each_board_names_model_submitter_date_and_signer_with_a_link_to_the_bundle(
    hub: HubServer, repo_id: str, board: tuple[str, str]
) -> None:
    card, key = board
    header = card.split("\n### expert-vqa\n\n", 1)[1].splitlines()[0]
    assert cells(header) == [
        "#", "model", "setup", "`exact_match.accuracy` ↓", "tok/row", "rows", "submitter",
        "run date", "signed by",
    ]  # fmt: skip
    lines = board_lines(card, "expert-vqa")
    assert [row[0] for row in lines.values()] == ["1", "2", "3"]
    assert list(lines) == ["gpt-5.2", "claude", "Qwen/Qwen3.5-27B"]  # 0.9, 0.7, 0.6
    for model, row in lines.items():
        assert row[6] == "Ada Lovelace" and row[7] == "2026-06-15"  # the run's UTC date
        link = re.fullmatch(r"\[`([0-9a-f]{8})`\]\(([^)]+)\)", row[2])
        assert link is not None, row[2]
        prefix = f"https://huggingface.co/datasets/{repo_id}/blob/main/"
        assert link.group(2).startswith(prefix) and link.group(2).endswith(".tar.zst")
        path = link.group(2).removeprefix(prefix)
        assert hub.file_bytes(repo_id, path) is not None, path  # the bundle is there
        assert f"_{link.group(1)}/expert-vqa@" in path
        signer = key.removeprefix("SHA256:")[:12] if model == "gpt-5.2" else None
        assert row[8] == (f"`{signer}…`" if signer else "-")
    assert "Qwen/Qwen3.5-27B" in board_lines(card, "maze")


def test_the_overview_ranks_setups_across_tasks(board: tuple[str, str]) -> None:
    card, _ = board
    overview = card.split("\n## Across tasks\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert cells(overview[0]) == ["#", "model", "setup", "tasks", "mean rank", "expert-vqa", "maze"]
    rows = [cells(line) for line in overview[2:]]
    # gpt-5.2: ranks 1 and 2 (mean 1.5); Qwen: 3 and 1 (2.0); claude: one task only
    assert [(r[0], r[1], r[3], r[4], r[5], r[6]) for r in rows] == [
        ("1", "gpt-5.2", "2", "1.5", "0.9", "0.2"),
        ("2", "Qwen/Qwen3.5-27B", "2", "2.0", "0.6", "0.8"),
        ("3", "claude", "1", "2.0", "0.7", ""),
    ]
    assert rows[0][2].startswith("`gpt-5-2_") and rows[1][2].startswith("`qwen-qwen3-5-27b_")


def test_the_tables_hold_the_run_date_to_the_nanosecond_the_signer_and_stale(
    hub: HubServer, repo_id: str, board: tuple[str, str]
) -> None:
    _, key = board
    everything = all_tasks_table(hub, repo_id)
    task = table(hub, repo_id, task_table("expert-vqa"))
    for read in (everything, task):
        assert read.schema.field("run_date").type == pa.timestamp("us", tz="UTC")
        assert read.schema.field("published_at").type == pa.timestamp("us", tz="UTC")
        dates = read.column("run_date").cast(pa.int64()).to_pylist()
        assert set(dates) == {RUN_NANOSECONDS // 1000}
        assert set(read.column("run_date_text").to_pylist()) == {"2026-06-15T10:42:22.045588909Z"}
        assert read.schema.field("stale").type == pa.bool_()
        signers = dict(zip(read.column("bundle_id").to_pylist(),
                           read.column("signer_fingerprint").to_pylist(), strict=True))  # fmt: skip
        assert {b for b, k in signers.items() if k is not None} == {
            b for b in signers if b.startswith("gpt-5-2_") and "/expert-vqa@" in b
        }
        assert set(signers.values()) == {key, None}
    assert len(everything) == len(SCORES) and len(task) == 3
