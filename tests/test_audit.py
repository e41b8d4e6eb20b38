"""`bundler audit` end to end: a stranger re-checks a leaderboard the local Hub server holds,
with no token, and finds what was forged on it: a row changed consistently in the table, a
ghost row, a bundle the board leaves out, a field that differs, a signature that fails or whose
key the leaderboard does not allow. The sample is the same for the same seed, and a run that a
rate limit stops resumes where it stopped."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import WRITE_TOKEN
from factory import RunSpec
from helpers import run_cli
from hubserver import HubServer, RateLimits
from test_board_derived import delete_by_hand
from test_card_refresh import commit_by_hand
from test_sign import make_key
from test_upload import make_bundles, publish, repo_files

from bundler.core.errors import RateLimitOutlasts
from bundler.hub.audit.findings import sampled
from bundler.hub.audit.pace import Pacer
from bundler.hub.audit.run import AuditOptions
from bundler.hub.audit.run import audit as run_audit
from bundler.hub.client import ratelimit
from bundler.hub.client.session import HubSession
from bundler.hub.repo.paths import TASKS_FILE, bundle_of_path, table_part
from bundler.local.layout import BundleId

TASKS = ("alpha", "beta", "gamma")


def audit(repo_id: str, *args: object, token: str = "") -> tuple[int, dict[str, Any], str]:
    """`bundler audit` as a stranger runs it: no token at all."""
    result = run_cli("audit", "--repo", repo_id, *args, "--json", env={"HF_TOKEN": token})
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, json.loads(result.stdout or "{}"), result.stderr


@pytest.fixture
def published(repo_id: str, tmp_path: Path) -> Path:
    """A board of three tasks, one bundle each, as uploads leave it."""
    specs = [RunSpec(task=task, model=f"m-{task}", rows=2) for task in TASKS]
    publish(bundles := make_bundles(tmp_path / "published", specs), repo_id)
    return bundles


def table(hub: HubServer, repo_id: str) -> pa.Table:
    return pq.read_table(pa.BufferReader(hub.file_bytes(repo_id, table_part(0)) or b""))


def with_rows(original: pa.Table, rows: list[dict[str, Any]]) -> bytes:
    """The table written again with `rows`, its schema and metadata kept: as a stranger who
    knows the format edits it."""
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist(rows, schema=original.schema), sink)
    return bytes(sink.getvalue().to_pybytes())


def kinds(report: dict[str, Any]) -> list[tuple[str, str | None, str | None]]:
    return [(f["kind"], f["bundle_id"], f["field"]) for f in report["findings"]]


BOARD_KINDS = ("task-table-differs", "chart-differs", "card-differs")


def row_kinds(report: dict[str, Any]) -> list[tuple[str, str | None, str | None]]:
    """The findings about rows and bundles, leaving out those about the task tables, charts
    and card that follow from them."""
    return [found for found in kinds(report) if found[0] not in BOARD_KINDS]


def board_findings(report: dict[str, Any]) -> list[tuple[str, str | None, str]]:
    return [
        (f["kind"], f["bundle_id"], f["path"])
        for f in report["findings"]
        if f["kind"] in BOARD_KINDS
    ]


def test_a_clean_board_audits_clean_with_no_token(
    hub: HubServer, repo_id: str, published: Path
) -> None:
    hub.reset_requests()
    code, report, stderr = audit(repo_id)
    assert code == 0, stderr
    assert report["kind"] == "audit" and report["findings"] == []
    assert report["bundles_on_branch"] == 3 and report["rows_published"] == 3
    assert [b["verdict"] for b in report["audited"]] == ["verified"] * 3
    assert "clean" in stderr
    # two file requests a bundle (the table's one part is the copy the upload kept on this
    # machine); api: the head, the listing of bundles, two lookups, the listings of the
    # table's parts and of the task tables
    counts = hub.request_counts(repo_id)
    assert counts["file"] == report["file_requests"] == 2 * 3
    assert counts["api"] == 6, counts


def forged_score(row: dict[str, Any], score: float) -> dict[str, Any]:
    """`row` with its accuracy raised everywhere the table holds it: the metrics.json text,
    the flattened metrics and the flat score, so that the table agrees with itself."""
    metrics = json.loads(str(row["metrics_json"]))
    metrics["exact_match"]["accuracy"] = score
    flat = [
        m | {"number": score, "json_value": json.dumps(score)}
        if m["name"] == "exact_match.accuracy"
        else m
        for m in row["metrics"]
    ]
    return row | {"metrics_json": json.dumps(metrics), "metrics": flat, "score": score}


def test_a_strangers_consistent_forgery_and_a_ghost_row_are_found(
    hub: HubServer, repo_id: str, published: Path
) -> None:
    original = table(hub, repo_id)
    rows = original.to_pylist()
    assert rows[0]["ranking_metric"] == "exact_match.accuracy" and rows[0]["score"] == 0.62
    ghost = dict(rows[1], bundle_id="ghost_00000000/beta@unpinned", player_name="ghost")
    commit_by_hand(
        repo_id,
        {table_part(0): with_rows(original, [forged_score(rows[0], 0.99), *rows[1:], ghost])},
    )
    code, report, stderr = audit(repo_id)
    assert code == 1, stderr
    forged = rows[0]["bundle_id"]
    assert kinds(report) == [
        ("unsupported-row", ghost["bundle_id"], None),
        ("field-differs", forged, "metrics"),
        ("field-differs", forged, "metrics_json"),
        ("field-differs", forged, "score"),
    ]
    (score,) = [f for f in report["findings"] if f["field"] == "score"]
    assert (score["published"], score["derived"]) == ("0.99", "0.62")
    assert "no such bundle on the branch" in report["findings"][0]["detail"]
    assert "ghost_00000000/beta@unpinned" in stderr and "0.99" in stderr


def test_a_bundle_left_off_the_board_and_a_changed_field_are_found(
    hub: HubServer, repo_id: str, published: Path
) -> None:
    original = table(hub, repo_id)
    rows = original.to_pylist()
    changed = rows[1] | {"input_tokens": int(rows[1]["input_tokens"]) // 2}
    commit_by_hand(repo_id, {table_part(0): with_rows(original, [changed, rows[2]])})
    code, report, stderr = audit(repo_id)
    assert code == 1, stderr
    assert row_kinds(report) == [
        ("field-differs", rows[1]["bundle_id"], "input_tokens"),
        ("missing-from-board", rows[0]["bundle_id"], None),
    ]
    # the task table still ranks the bundle no part holds now; the card still shows it
    left_off, task = rows[0]["bundle_id"], rows[0]["task_name"]
    assert ("task-table-differs", left_off, f"leaderboard/tasks/{task}.parquet") in (
        board_findings(report)
    )
    assert ("card-differs", left_off, "README.md") in board_findings(report)
    (differs,) = [f for f in report["findings"] if f["field"] == "input_tokens"]
    assert differs["derived"] == str(rows[1]["input_tokens"])


def test_a_row_whose_archive_is_gone_is_supported_by_nothing(
    hub: HubServer, repo_id: str, published: Path
) -> None:
    archive = next(path for path in repo_files(published) if path.endswith(".tar.zst"))
    delete_by_hand(repo_id, archive)
    code, report, stderr = audit(repo_id)
    assert code == 1, stderr
    bundle = str(bundle_of_path(archive))
    assert row_kinds(report) == [("unsupported-row", bundle, None)]
    (ranked,) = [f for f in report["findings"] if f["kind"] == "task-table-differs"]
    assert ranked["bundle_id"] == bundle
    assert "no verified bundle supports its row" in ranked["detail"]
    assert "its archive is missing" in report["findings"][0]["detail"]
    assert report["bundles_on_branch"] == 3 and len(report["audited"]) == 2


def test_an_unreadable_table_is_a_finding(hub: HubServer, repo_id: str, published: Path) -> None:
    commit_by_hand(repo_id, {table_part(0): b"not a table"})
    code, report, _ = audit(repo_id)
    assert code == 1
    assert [kind for kind, _, _ in row_kinds(report)] == ["unreadable-table"] + [
        "missing-from-board"
    ] * 3
    assert report["findings"][0]["path"] == table_part(0)
    assert "not a Parquet table" in report["findings"][0]["detail"]


def test_a_private_repository_needs_a_token_that_may_read_it(
    hub: HubServer, tmp_path: Path
) -> None:
    repo_id = "gptnt/private-audit-" + tmp_path.name[-8:]
    hub.create_repo(repo_id, private=True)
    specs = [RunSpec(task="alpha", rows=2)]
    publish(make_bundles(tmp_path, specs), repo_id)
    code, report, stderr = audit(repo_id)
    assert code == 2, stderr
    assert report["error_kind"] == "repository-not-found"
    code, report, stderr = audit(repo_id, token=WRITE_TOKEN)
    assert code == 0, stderr
    assert WRITE_TOKEN not in stderr + json.dumps(report)


def signed_bundles(root: Path, key: Path, tasks: tuple[str, ...]) -> Path:
    bundles = make_bundles(root, [RunSpec(task=task, model=f"m-{task}", rows=2) for task in tasks])
    done = run_cli("sign", bundles, "--key", key)
    assert done.returncode == 0, done.stderr
    return bundles


def allow(repo_id: str, name: str, key: Path) -> None:
    added = run_cli(
        "signers", "add", name, "--key", key.with_suffix(".pub"), "--repo", repo_id,
        env={"HF_TOKEN": WRITE_TOKEN},
    )  # fmt: skip
    assert added.returncode == 0, added.stderr


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs OpenSSH")
def test_every_signature_is_checked_against_the_allowed_signers(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    (keys := tmp_path / "keys").mkdir()
    ours, theirs = make_key(keys, "ours"), make_key(keys, "theirs")
    allow(repo_id, "gptnt", ours)  # the organization of the account that publishes them
    publish(signed_bundles(tmp_path / "ours", ours, ("alpha", "beta")), repo_id)
    code, report, stderr = audit(repo_id)
    assert code == 0, stderr
    assert [b["principals"] for b in report["audited"]] == [["gptnt"], ["gptnt"]]
    assert [b["committer"] for b in report["audited"]] == ["leaderboard-bot"] * 2
    foreign = signed_bundles(tmp_path / "theirs", theirs, ("gamma",))
    unsigned = make_bundles(tmp_path / "plain", [RunSpec(task="delta", rows=2)])
    publish(foreign, repo_id)
    publish(unsigned, repo_id)
    gamma_id, delta_id = (str(next(iter(_ids(bundles)))) for bundles in (foreign, unsigned))
    code, report, stderr = audit(repo_id)
    assert code == 1, stderr
    assert kinds(report) == [("signature", gamma_id, None)]
    assert "which the allowed signers do not list" in report["findings"][0]["detail"]
    # an unsigned bundle is a finding only where the leaderboard requires signatures
    required = {"version": 1, "tasks": {}, "require_signature": True}
    commit_by_hand(repo_id, {TASKS_FILE: json.dumps(required).encode()})
    # and a signature moved onto another bundle's sidecar by hand: the row it had stays
    files = repo_files(tmp_path / "ours" / "bundles")
    (alpha,) = [p for p in files if p.endswith(".json") and "alpha@" in p]
    (beta,) = [p for p in files if p.endswith(".json") and "beta@" in p]
    moved = json.loads(files[alpha]) | {"signature": json.loads(files[beta])["signature"]}
    commit_by_hand(repo_id, {alpha: json.dumps(moved).encode()})
    code, report, stderr = audit(repo_id)
    assert code == 1, stderr
    alpha_id = str(bundle_of_path(alpha))
    assert row_kinds(report) == [
        ("unsupported-row", alpha_id, None),
        ("signature", delta_id, None),
        ("signature", alpha_id, None),
        ("signature", gamma_id, None),
    ]
    details = [f["detail"] for f in report["findings"]]
    assert details[1] == "unsigned, where the leaderboard requires a signature"
    assert "does not match the archive" in details[2]


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs OpenSSH")
def test_a_bundle_on_the_branch_signed_for_someone_but_its_committer_is_found(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    key = make_key(tmp_path, "theirs")
    allow(repo_id, "submitter", key)
    publish(bundles := signed_bundles(tmp_path / "b", key, ("alpha",)), repo_id)
    (bundle_id,) = map(str, _ids(bundles))
    before = len(hub.requests(kind="api"))
    code, report, stderr = audit(repo_id)
    assert code == 1, stderr
    assert kinds(report) == [("signature", bundle_id, None)]
    assert report["findings"][0]["detail"] == (
        f"signed by submitter (key {report['audited'][0]['signer']}), not by its committer "
        "leaderboard-bot nor an organization the Hub lists them in"
    )
    # the committer costs the expanded listing, the commit listing and one profile
    asked = [r.path.split("/")[-2] for r in hub.requests(kind="api")[before:]]
    assert [name for name in asked if name in ("commits", "paths-info", "leaderboard-bot")] == [
        "paths-info",  # the table's parts folder
        "paths-info",  # the task definitions and allowed signers
        "paths-info",  # the signed sidecar's last commit
        "commits",
        "leaderboard-bot",  # their profile's organizations
    ]


def _ids(bundles: Path) -> set[BundleId]:
    return {b for b in map(bundle_of_path, repo_files(bundles)) if b is not None}


def test_a_sample_is_the_same_for_the_same_seed(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    specs = [RunSpec(task="alpha", model=f"m-{n}", rows=2) for n in range(6)]
    publish(make_bundles(tmp_path, specs), repo_id)
    picked = [
        [b["bundle_id"] for b in audit(repo_id, "--sample", 2, *seed)[1]["audited"]]
        for seed in ((), (), ("--seed", "7"), ("--seed", "7"))
    ]
    assert len(picked[0]) == 2 and picked[0] == picked[1] and picked[2] == picked[3]
    assert {tuple(p) for p in picked} == {tuple(picked[0]), tuple(picked[2])}
    assert picked[0] != picked[2]  # a fact of these ids and seeds, checked once


def test_a_sample_takes_every_bundle_the_board_has_no_row_for() -> None:
    ids = [BundleId.parse(f"p{n}_00000000/alpha@unpinned") for n in range(10)]
    rows = {str(b) for b in ids[:8]}
    chosen = sampled(ids, rows, 3, seed=0)
    assert len(chosen) == 5 and {str(ids[8]), str(ids[9])} <= chosen
    assert chosen == sampled(reversed(ids), rows, 3, seed=0)
    assert sampled(ids, rows, None, seed=0) == {str(b) for b in ids}


def test_a_run_stopped_by_the_rate_limit_resumes_where_it_stopped(
    hub: HubServer, repo_id: str, published: Path
) -> None:
    # the table and two bundles fit in the window; the third bundle's archive does not
    hub.enable_rate_limits(RateLimits(anonymous_resolvers=5))
    code, report, stderr = audit(repo_id, "--max-wait", 0)
    assert code == 75, stderr
    assert report["error_kind"] == "rate-limit-outlasts-wait" and "resolvers" in report["error"]
    hub.advance_clock(hub.seconds_to_window_reset())
    hub.reset_requests()
    code, report, stderr = audit(repo_id, "--max-wait", 0)
    assert code == 0, stderr
    assert [b["cached"] for b in report["audited"]] == [True, True, False]
    # the third bundle; the table's part is the copy kept on this machine
    assert report["file_requests"] == hub.request_counts(repo_id)["file"] == 2
    code, report, _ = audit(repo_id)  # all three judged, the part kept: nothing downloaded
    assert code == 0 and report["file_requests"] == 0


def test_the_pacer_waits_for_room_and_stops_when_that_is_too_long(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [0.0]
    pacer = Pacer(
        budget=4, window=300, clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s)
    )
    monkeypatch.setattr(ratelimit.POLICY, "max_wait", 300.0)
    pacer.take(2)
    now[0] = 10.0
    pacer.take(2)
    now[0] = 20.0
    pacer.take(2)  # the first two leave the window at 300
    assert now[0] == 300.0 and pacer.total == 6 and len(pacer.waits) == 1
    monkeypatch.setattr(ratelimit.POLICY, "max_wait", 5.0)
    with pytest.raises(RateLimitOutlasts) as raised:
        pacer.take(2)  # room at 310 s, 10 s away
    assert raised.value.retry_after == 10.0 and pacer.total == 6


def test_an_audit_out_of_budget_stops_and_the_next_run_resumes(
    repo_id: str, published: Path
) -> None:
    """The pacer's own stop: room for the table and one bundle, and no wait allowed."""
    with pytest.raises(RateLimitOutlasts):
        run_audit(
            HubSession(repo_id, token=False, max_wait=0), AuditOptions(), None, Pacer(budget=3)
        )
    report = run_audit(HubSession(repo_id, token=False), AuditOptions())
    assert [bundle.cached for bundle in report.audited] == [True, False, False]
    assert report.exit_code == 0 and report.file_requests == 2 * 2
