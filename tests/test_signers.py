"""Who vouches for a bundle: the leaderboard's allowed signers (OpenSSH's own format), kept by
its maintainers with `bundler signers`, and review's `signature` check against the pull
request's author. Keys are made by ssh-keygen; the file is checked with stock OpenSSH too."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from conftest import LAB, OTHER_SUBMITTER_TOKEN, SUBMITTER_TOKEN, WRITE_TOKEN
from helpers import run_cli
from hubserver import HubServer
from test_allowed_signers import weak_rsa_key
from test_card_refresh import commit_by_hand
from test_review import World, checks, make_world, propose, review
from test_sign import make_key

from bundler.hub.repo.paths import ALLOWED_SIGNERS, TASKS_FILE
from bundler.hub.tasks.signers import AllowedSigners
from bundler.local.sshtime import openssh_time, read_utc_time

pytestmark = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs OpenSSH")


@pytest.fixture
def world(hub: HubServer, repo_id: str, tmp_path: Path) -> World:
    return make_world(hub, repo_id, tmp_path)


def signers(world: World, *args: object, token: str = WRITE_TOKEN) -> tuple[int, dict, str]:
    result = run_cli("signers", *args, "--repo", world.repo_id, "--json", env={"HF_TOKEN": token})
    assert "Traceback" not in result.stderr
    return result.returncode, json.loads(result.stdout or "{}"), result.stderr


def signed(world: World, name: str, key: Path) -> Path:
    """A bundle of `name`'s, signed with `key`."""
    bundles = world.bundles(name, [world.spec(model=f"m-{name}")])
    done = run_cli("sign", bundles, "--key", key)
    assert done.returncode == 0, done.stderr
    return bundles


def signature_of(world: World, num: int) -> dict[str, object]:
    _, report, _ = review(world, "--pr", num, token=WRITE_TOKEN)
    (bundle,) = report["pull_requests"][0]["bundles"]
    return checks(bundle)["signature"]


def test_maintainers_keep_the_allowed_signers_and_stock_openssh_reads_them(
    world: World, tmp_path: Path
) -> None:
    key = make_key(tmp_path, "submitter")
    code, report, stderr = signers(world, "add", "submitter", "--key", key.with_suffix(".pub"))
    assert code == 0 and report["commit"] == world.hub.commits(world.repo_id)[0].oid, stderr
    commits = len(world.hub.commits(world.repo_id))
    again = signers(world, "add", "submitter", "--key", key.with_suffix(".pub"))[1]
    assert again["commit"] is None and len(world.hub.commits(world.repo_id)) == commits
    (listed,) = signers(world, "list", token="")[1]["signers"]
    assert listed["principals"] == ["submitter"] and listed["fingerprint"].startswith("SHA256:")
    # the very file the leaderboard keeps verifies a signed archive with ssh-keygen -Y verify
    allowed = tmp_path / "allowed_signers"
    allowed.write_bytes(world.hub.file_bytes(world.repo_id, ALLOWED_SIGNERS) or b"")
    bundles = signed(world, "ada", key)
    (sidecar,) = bundles.rglob("*.json")
    sig = tmp_path / "b.sig"
    sig.write_text(json.loads(sidecar.read_text())["signature"]["sshsig"])
    with next(bundles.rglob("*.tar.zst")).open("rb") as archive:
        stock = subprocess.run(
            ["ssh-keygen", "-Y", "verify", "-f", allowed, "-I", "submitter", "-n",
             "statics-bundler", "-s", sig],
            stdin=archive, capture_output=True, text=True, check=False,
        )  # fmt: skip
    assert stock.returncode == 0, stock.stderr
    assert signers(world, "remove", "submitter")[1]["signers"] == []
    assert signers(world, "add", "submitter", "--key", key, token=SUBMITTER_TOKEN)[0] == 2


def test_review_passes_the_authors_own_signature_and_fails_anyone_elses(
    world: World, tmp_path: Path
) -> None:
    mine, theirs = make_key(tmp_path, "mine"), make_key(tmp_path, "theirs")
    assert signers(world, "add", "submitter", "--key", mine.with_suffix(".pub"))[0] == 0
    assert signers(world, "add", "second-submitter", "--key", theirs.with_suffix(".pub"))[0] == 0
    own = propose(world, SUBMITTER_TOKEN, signed(world, "own", mine))
    assert signature_of(world, own)["status"] == "passed"
    borrowed = propose(world, OTHER_SUBMITTER_TOKEN, signed(world, "borrowed", mine))
    check = signature_of(world, borrowed)
    assert check["status"] == "failed"
    assert "not by the pull request's author second-submitter" in str(check["detail"])
    stranger = propose(world, SUBMITTER_TOKEN, signed(world, "stranger", make_key(tmp_path, "x")))
    check = signature_of(world, stranger)
    assert check["status"] == "failed" and "do not list" in str(check["detail"])
    unsigned = propose(world, SUBMITTER_TOKEN, world.bundles("plain", [world.spec(model="p")]))
    assert signature_of(world, unsigned)["status"] == "warned"
    tasks = json.loads(world.hub.file_bytes(world.repo_id, TASKS_FILE) or b"")
    commit_by_hand(
        world.repo_id, {TASKS_FILE: json.dumps(tasks | {"require_signature": True}).encode()}
    )
    assert signature_of(world, unsigned)["status"] == "failed"


def test_review_judges_a_key_s_validity_now_as_the_bundle_would_land(
    world: World, tmp_path: Path
) -> None:
    """A pull request has not landed: review judges `valid-after`/`valid-before` at its own
    now, as stock `ssh-keygen -Y verify -Overify-time` does. A retired key passes no new
    bundle; a key valid only from a date to come passes none yet; one valid since a past date
    passes."""
    old, later, since = (make_key(tmp_path, name) for name in ("old", "later", "since"))
    assert signers(world, "add", "submitter", "--key", old.with_suffix(".pub"))[0] == 0
    before = propose(world, SUBMITTER_TOKEN, signed(world, "before", old))
    assert signature_of(world, before)["status"] == "passed"
    retired = signers(world, "retire", "submitter")[1]["signers"][0]["valid_before"]
    # valid-before holds through its second, as OpenSSH reads it: review in the next one
    time.sleep(max(0.0, read_utc_time(retired) + 1 - time.time()))
    after = propose(world, SUBMITTER_TOKEN, signed(world, "after", old))
    check = signature_of(world, after)
    assert check["status"] == "failed" and "do not list as valid at" in str(check["detail"])
    for key, valid_after in ((later, "20990101Z"), (since, "20200101Z")):
        added = signers(
            world,
            "add",
            "submitter",
            "--key",
            key.with_suffix(".pub"),
            "--valid-after",
            valid_after,
        )
        assert added[0] == 0, added[2]
    statuses = {}
    allowed = tmp_path / "allowed_signers"
    allowed.write_bytes(world.hub.file_bytes(world.repo_id, ALLOWED_SIGNERS) or b"")
    for key in (old, later, since):
        num = propose(world, SUBMITTER_TOKEN, signed(world, f"by-{key.name}", key))
        statuses[key.name] = signature_of(world, num)["status"]
        sig = signature_file(world, tmp_path, key)
        found = subprocess.run(
            ["ssh-keygen", "-Y", "find-principals", "-f", allowed, "-s", sig,
             f"-Overify-time={openssh_time(int(time.time()))}"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert (found.returncode == 0) is (statuses[key.name] == "passed"), key.name
    assert statuses == {"old": "failed", "later": "failed", "since": "passed"}


def test_an_organizations_key_passes_for_the_members_the_hub_lists(
    world: World, tmp_path: Path
) -> None:
    lab = make_key(tmp_path, "lab")
    assert signers(world, "add", LAB, "--key", lab.with_suffix(".pub"))[0] == 0
    members = propose(world, SUBMITTER_TOKEN, signed(world, "member", lab))
    second = propose(world, SUBMITTER_TOKEN, signed(world, "member-again", lab))
    outsider = propose(world, OTHER_SUBMITTER_TOKEN, signed(world, "outsider", lab))
    before = len(world.hub.requests())
    _, report, _ = review(world, "--pr", members, "--pr", second, "--pr", outsider)
    asked = [r.path for r in world.hub.requests()[before:] if r.path.startswith("/api/users/")]
    # one request per author a round, whatever the number of their bundles
    assert asked == ["/api/users/submitter/overview", "/api/users/second-submitter/overview"]
    found = [checks(pr["bundles"][0])["signature"] for pr in report["pull_requests"]]
    assert [check["status"] for check in found] == ["passed", "passed", "failed"]
    assert f"signed by {LAB}, which submitter is a member of" in str(found[0]["detail"])
    # second-submitter belongs to the organization, but their profile does not show it
    assert "not by the pull request's author second-submitter" in str(found[2]["detail"])
    # a key of the author's own asks the Hub for no organization
    own = make_key(tmp_path, "mine")
    assert signers(world, "add", "submitter", "--key", own.with_suffix(".pub"))[0] == 0
    num = propose(world, SUBMITTER_TOKEN, signed(world, "own", own))
    before = len(world.hub.requests())
    assert signature_of(world, num)["status"] == "passed"
    assert not [r for r in world.hub.requests()[before:] if r.path.startswith("/api/users/")]


def test_a_bundle_merged_by_review_counts_as_committed_by_its_proposer(
    world: World, tmp_path: Path
) -> None:
    key = make_key(tmp_path, "lab")
    assert signers(world, "add", LAB, "--key", key.with_suffix(".pub"))[0] == 0
    num = propose(world, SUBMITTER_TOKEN, signed(world, "merged", key))
    _, report, stderr = review(world, "--pr", num, "--merge", token=WRITE_TOKEN)
    assert report["pull_requests"][0]["merge"] == "merged", stderr
    audited = run_cli("audit", "--repo", world.repo_id, "--json", env={"HF_TOKEN": ""})
    assert audited.returncode == 0, audited.stderr
    (bundle,) = [b for b in json.loads(audited.stdout)["audited"] if b["signer"] is not None]
    # the maintainer's merge commit, and the author of the PR whose head holds that sidecar
    assert bundle["committer"] == "leaderboard-bot, submitter"
    assert bundle["principals"] == [LAB]


def test_a_leaderboard_naming_no_signers_asks_for_no_signature(world: World) -> None:
    unsigned = propose(world, SUBMITTER_TOKEN, world.bundles("plain", [world.spec(model="p")]))
    check = signature_of(world, unsigned)
    assert check["status"] == "passed" and "names no allowed signers" in str(check["detail"])


def test_a_pull_request_touching_the_allowed_signers_fails_layout(world: World) -> None:
    extra = {ALLOWED_SIGNERS: b"submitter ssh-ed25519 AAAA\n"}
    num = propose(world, SUBMITTER_TOKEN, world.bundles("p", [world.spec(model="p")]), extra=extra)
    _, report, _ = review(world, "--pr", num, token=WRITE_TOKEN)
    layout = checks(report["pull_requests"][0])["layout"]
    assert layout["status"] == "failed" and ALLOWED_SIGNERS in layout["detail"]


@pytest.mark.parametrize(
    ("line", "allows"),
    [
        ('ada namespaces="statics-bundler" {key}', True),
        ("ada {key}", True),
        ('ada namespaces="git" {key}', False),
        ("ada cert-authority {key}", False),
        ('ada valid-after="20990101" {key}', False),
    ],
)
def test_a_line_allows_no_more_than_openssh_would(tmp_path: Path, line: str, allows: bool) -> None:
    key = make_key(tmp_path, "ada").with_suffix(".pub").read_text().split()
    parsed = AllowedSigners.parse(line.format(key=f"{key[0]} {key[1]}").encode())
    (signer,) = parsed.entries()
    assert bool(parsed.principals_of(signer.fingerprint)) is allows


@pytest.mark.parametrize(
    "line",
    [
        "* ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA",
        "ada ssh-dss AAAA",
        "ada ssh-ed25519 !!!",
        "ada",
    ],
)
def test_a_line_openssh_cannot_read_allows_nothing(line: str) -> None:
    """OpenSSH skips such a line and reads on; so does the bundler."""
    assert AllowedSigners.parse(f"# comment\n{line}\n".encode()).entries() == []


def test_a_key_hidden_behind_a_comment_passes_no_review(world: World, tmp_path: Path) -> None:
    """A web-page merge that adds eve's key after a comment holding a lone CR: OpenSSH reads a
    comment, and so does review (Python's splitlines() read a key for eve)."""
    (tmp_path / "keys").mkdir()
    key = make_key(tmp_path / "keys", "eve")
    public = " ".join(key.with_suffix(".pub").read_text().split()[:2])
    hidden = f"# reviewed by the maintainers\rsubmitter {public}\n".encode()
    commit_by_hand(world.repo_id, {ALLOWED_SIGNERS: hidden})
    num = propose(world, SUBMITTER_TOKEN, signed(world, "eve", key))
    check = signature_of(world, num)
    assert check["status"] == "failed" and "do not list" in str(check["detail"])
    assert signers(world, "list", token="")[1]["signers"] == []


def test_a_key_openssh_refuses_is_refused_by_signers_add_and_review(
    world: World, tmp_path: Path
) -> None:
    (tmp_path / "keys").mkdir()
    weak = weak_rsa_key(tmp_path / "keys", "weak")
    code, _, stderr = signers(world, "add", "submitter", "--key", weak.with_suffix(".pub"))
    assert code == 2 and "768 bits" in stderr and str(weak.with_suffix(".pub")) in stderr
    assert len(stderr.strip().splitlines()) == 1
    assert world.hub.file_bytes(world.repo_id, ALLOWED_SIGNERS) is None
    public = " ".join(weak.with_suffix(".pub").read_text().split()[:2])
    commit_by_hand(world.repo_id, {ALLOWED_SIGNERS: f"submitter {public}\n".encode()})
    num = propose(world, SUBMITTER_TOKEN, signed(world, "weak", weak))
    check = signature_of(world, num)
    assert check["status"] == "failed", check


def test_signers_add_and_remove_keep_the_lines_they_do_not_touch(
    world: World, tmp_path: Path
) -> None:
    kept = make_key(tmp_path, "kept").with_suffix(".pub").read_text().split()[:2]
    by_hand = f"# the maintainers' notes\r\nlab\t{kept[0]} {kept[1]} laptop\r\n".encode()
    commit_by_hand(world.repo_id, {ALLOWED_SIGNERS: by_hand})
    key = make_key(tmp_path, "submitter")
    assert signers(world, "add", "submitter", "--key", key.with_suffix(".pub"))[0] == 0
    added = world.hub.file_bytes(world.repo_id, ALLOWED_SIGNERS) or b""
    assert added.startswith(by_hand) and added.count(b"\n") == 3
    assert signers(world, "remove", "submitter")[0] == 0
    assert world.hub.file_bytes(world.repo_id, ALLOWED_SIGNERS) == by_hand


def test_a_key_retires_with_valid_before_and_keeps_every_other_line(
    world: World, tmp_path: Path
) -> None:
    """`signers retire` writes `valid-before` (now, UTC) on that key's line instead of
    deleting it; `signers add --valid-after/--valid-before` write those options; a name with
    nothing to retire exits 1 saying so, a time OpenSSH would read as local time exits 2."""
    old, new, lab = (make_key(tmp_path, name).with_suffix(".pub") for name in ("o", "n", "lab"))
    public = {key: " ".join(key.read_text().split()[:2]) for key in (old, new, lab)}
    by_hand = f"# notes\r\nlab\t{public[lab]} laptop\r\n".encode()
    commit_by_hand(world.repo_id, {ALLOWED_SIGNERS: by_hand})
    assert signers(world, "add", "submitter", "--key", old)[0] == 0
    code, report, stderr = signers(
        world, "add", "submitter", "--key", new, "--valid-after", "20240101Z"
    )
    assert code == 0, stderr
    assert [s["valid_after"] for s in report["signers"]] == [None, None, "20240101000000Z"]
    started = int(time.time())
    code, report, stderr = signers(world, "retire", "submitter", "--key", old)
    assert code == 0 and report["changed"], stderr
    assert report["commit"] == world.hub.commits(world.repo_id)[0].oid
    after = world.hub.file_bytes(world.repo_id, ALLOWED_SIGNERS) or b""
    lines = after.split(b"\n")
    assert after.startswith(by_hand) and len(lines) == 5
    retired_before = report["signers"][1]["valid_before"]
    bound = f'namespaces="statics-bundler",valid-before="{retired_before}"'
    assert lines[2] == f"submitter {bound} {public[old]}".encode()
    assert lines[3].startswith(b'submitter namespaces="statics-bundler",valid-after="2024')
    retired_at = read_utc_time(retired_before)
    assert started <= retired_at <= time.time()
    # stock OpenSSH reads the retirement as the bundler does, on each side of it
    allowed = tmp_path / "allowed_signers"
    allowed.write_bytes(after)
    sig = signature_file(world, tmp_path, old.with_suffix(""))
    for at, expected in ((retired_at, "submitter"), (retired_at + 1, None)):
        found = subprocess.run(
            ["ssh-keygen", "-Y", "find-principals", "-f", allowed, "-s", sig,
             f"-Overify-time={openssh_time(at)}"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert (found.stdout.strip() or None) == expected, found.stderr
    code, report, stderr = signers(world, "retire", "nobody")
    assert code == 1 and "nobody" in stderr and len(stderr.strip().splitlines()) == 1
    assert report["error"]
    assert signers(world, "add", "eve", "--key", new, "--valid-before", "20240101")[0] == 2
    assert world.hub.file_bytes(world.repo_id, ALLOWED_SIGNERS) == after
    # without --key, every line of theirs retires
    assert signers(world, "retire", "submitter")[0] == 0
    listed = signers(world, "list", token="")[1]["signers"]
    assert [s["valid_before"] is not None for s in listed] == [False, True, True]


def signature_file(world: World, tmp_path: Path, key: Path) -> Path:
    """The SSHSIG of a bundle signed with `key`, as a `.sig` file for ssh-keygen."""
    bundles = signed(world, f"signed-{key.name}", key)
    (sidecar,) = bundles.rglob("*.json")
    sig = tmp_path / f"{key.name}.sig"
    sig.write_text(json.loads(sidecar.read_text())["signature"]["sshsig"])
    return sig
