"""`bundler eval-results` end to end against the test Hub: a leaderboard's scores proposed to
the models' own repositories as `.eval_results/<benchmark>.yaml`, one pull request per model,
read back with huggingface_hub's own `parse_eval_result_entries`. Only what the board stands
behind is proposed (ranked, complete, pinned, not stale, the model's best, its bundle
verified), nothing twice, and a dry run opens nothing."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from conftest import READ_TOKEN, SUBMITTER_TOKEN, WRITE_TOKEN
from factory import RunSpec, write_tree
from helpers import run_cli
from hubserver import HubServer
from huggingface_hub import (
    CommitOperationAdd,
    EvalResultEntry,
    HfApi,
    parse_eval_result_entries,
)
from huggingface_hub.errors import HfHubHTTPError
from test_card_refresh import commit_by_hand
from test_upload import publish

from bundler.core.yamltext import UnreadableYaml, load_untrusted_yaml
from bundler.hub.evalresults.benchmark import Benchmark, parse_benchmark, task_id_of
from bundler.hub.repo.paths import repo_archive, task_table
from bundler.local.collect import CollectOptions, collect
from bundler.local.layout import BundleId

TASK = "expert-vqa"
METRIC = "exact_match.accuracy"
EVAL_YAML = """\
name: Expert VQA
description: Questions only experts answer.
evaluation_framework: gptnt
tasks:
  - id: vqa_validation
    config: default
    split: validation
  - id: vqa_test
    config: default
    split: test
"""


def scored(accuracy: float, rows: int) -> dict[str, Any]:
    return {"exact_match": {"accuracy": accuracy, "n": rows}}


class Board:
    """A leaderboard on the test Hub whose task runs on a benchmark dataset with eval.yaml."""

    def __init__(self, hub: HubServer, repo_id: str, root: Path, *, eval_yaml: bool = True):
        self.hub, self.repo_id, self.root = hub, repo_id, root
        suffix = repo_id[-10:]
        self.dataset = f"GPTNT/expert-VQA-{suffix}"
        files = {"README.md": b"---\nlicense: mit\n---\n"}
        if eval_yaml:
            files["eval.yaml"] = EVAL_YAML.encode()
        hub.create_repo(self.dataset, files=files)
        self.revision = hub.commits(self.dataset)[0].oid
        # model repositories of org gptnt: the maintainer owns them, the submitter does not
        self.qwen = f"gptnt/Qwen3.5-27B-{suffix}"
        self.small = f"gptnt/small-{suffix}"
        for model in (self.qwen, self.small):
            hub.create_repo(model, repo_type="model", files={"README.md": b"# a model\n"})
        defined = run_cli(
            "tasks", "define", TASK, "--repo", repo_id, "--dataset", self.dataset,
            "--split", "test", "--metric", METRIC, env={"HF_TOKEN": WRITE_TOKEN},
        )  # fmt: skip
        assert defined.returncode == 0, defined.stderr

    def spec(self, model: str, accuracy: float, rows: int = 4, **fields: Any) -> RunSpec:
        return RunSpec(
            task=TASK,
            model=model,
            rows=rows,
            hf_repo_id=self.dataset,
            resolved_revision=self.revision,
            metrics=scored(accuracy, rows),
            thoughts_chars=40,
            directory=fields.get("player_name"),  # two setups of one model: two run folders
            **fields,
        )

    def publish(self, name: str, specs: list[RunSpec], expected: int = 4) -> None:
        output, bundles = self.root / name / "output", self.root / name / "bundles"
        write_tree(output, specs, how_do_you=False)
        options = CollectOptions(expected_rows={TASK: expected}, allow_partial=True)
        assert not collect(output, bundles, options).refused
        publish(bundles, self.repo_id, allow_partial=True)

    def shown_rows(self) -> dict[str, dict[str, Any]]:
        data = self.hub.file_bytes(self.repo_id, task_table(TASK)) or b""
        return {row["bundle_id"]: row for row in pq.read_table(pa.BufferReader(data)).to_pylist()}


@pytest.fixture
def board(hub: HubServer, repo_id: str, tmp_path: Path) -> Board:
    made = Board(hub, repo_id, tmp_path)
    made.publish(
        "first",
        [
            made.spec(made.qwen, 0.75),
            made.spec(made.small, 0.5, player_name="small-a"),
            made.spec(made.small, 0.25, player_name="small-b"),  # superseded by small-a
            made.spec("gpt-5.2", 0.9),  # a provider's model: no repository
            made.spec("Nobody/absent-model", 0.3),  # names a repository the Hub lacks
        ],
    )
    made.publish(
        "partial", [made.spec(made.qwen, 0.99, rows=2, player_name="qwen-partial")], expected=4
    )
    return made


def eval_results(repo_id: str, *args: object, token: str = "") -> tuple[int, dict[str, Any]]:
    result = run_cli("eval-results", "--repo", repo_id, *args, "--json", env={"HF_TOKEN": token})
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, json.loads(result.stdout or "{}")


def entries_of(text: str | bytes) -> list[EvalResultEntry]:
    return parse_eval_result_entries(yaml.safe_load(text))


def test_a_dry_run_proposes_what_the_board_stands_behind_and_opens_nothing(
    hub: HubServer, board: Board
) -> None:
    code, report = eval_results(board.repo_id, "--dry-run")
    assert code == 0, report
    by_model = {p["model_repo"]: p for p in report["proposals"]}
    assert sorted(by_model) == sorted([board.qwen, board.small])
    shown = board.shown_rows()
    for model, proposal in by_model.items():
        assert proposal["pull_request"] is None and proposal["url"] is None
        ((file),) = proposal["files"]
        assert file["path"] == f".eval_results/expert-VQA-{board.repo_id[-10:]}.yaml"
        (entry,) = entries_of(file["text"])
        (proposed,) = proposal["entries"]
        row = shown[proposed["bundle_id"]]
        bundle = BundleId.parse(proposed["bundle_id"])
        archive_commit = next(
            c.oid for c in hub.commits(board.repo_id) if repo_archive(bundle) in c.files_changed
        )
        assert entry == EvalResultEntry(
            dataset_id=board.dataset,
            task_id="vqa_test",  # eval.yaml's task measured on the task's split
            value=row["ranking_score"],
            dataset_revision=board.revision,
            date=row["run_date_text"],
            source_url=f"{hub.url}/datasets/{board.repo_id}/resolve/{archive_commit}/"
            f"{quote(repo_archive(bundle))}",
            source_name=board.repo_id,
            notes=f"bundle {proposed['bundle_id']}",
        ), model
        # the source is the very archive the board publishes, for good
        assert hub.file_bytes(
            board.repo_id, repo_archive(bundle), revision=archive_commit
        ) == hub.file_bytes(board.repo_id, repo_archive(bundle))
        assert hub.pull_requests(model, repo_type="model") == []
    assert by_model[board.qwen]["entries"][0]["value"] == 0.75
    assert by_model[board.small]["entries"][0]["value"] == 0.5
    reasons = sorted((n["reason"], n["model_repo"] or "-") for n in report["not_proposed"])
    assert reasons == [
        ("no-model-repository", "-"),
        ("no-model-repository", "Nobody/absent-model"),
        ("partial", board.qwen),
        ("superseded", board.small),
    ]
    human = run_cli("eval-results", "--repo", board.repo_id, "--dry-run")
    assert human.returncode == 0 and human.stdout == ""
    assert f"would open a pull request on {board.qwen} with 1 entry" in human.stderr
    assert "task_id: vqa_test" in human.stderr and "not proposed" in human.stderr


def test_pull_requests_are_opened_once_by_a_user_who_owns_no_model(board: Board) -> None:
    """The submitter owns neither model: the Hub lets anyone open a pull request on a model
    (hub-docs eval-results, "Community Contributions"), and the test Hub does too."""
    code, report = eval_results(board.repo_id, token=SUBMITTER_TOKEN)
    assert code == 0, report
    for proposal in report["proposals"]:
        (pr,) = board.hub.pull_requests(proposal["model_repo"], repo_type="model")
        assert pr.author == "submitter" and pr.status == "open"
        assert proposal["pull_request"] == pr.num and proposal["url"].endswith(f"/{pr.num}")
        assert board.repo_id in pr.title and proposal["entries"][0]["bundle_id"] in pr.description
        ((file),) = proposal["files"]
        held = board.hub.file_bytes(
            proposal["model_repo"], file["path"], repo_type="model", revision=pr.ref
        )
        assert held == file["text"].encode()
        assert entries_of(held or b"")[0].value == proposal["entries"][0]["value"]
        # main is the owner's to change: nothing landed there
        assert board.hub.file_bytes(proposal["model_repo"], file["path"], repo_type="model") is None

    again_code, again = eval_results(board.repo_id, token=SUBMITTER_TOKEN)
    assert again_code == 0 and again["proposals"] == []
    assert sorted(h["held_in"] for h in again["already_held"]) == ["refs/pr/1", "refs/pr/1"]
    for model in (board.qwen, board.small):
        assert len(board.hub.pull_requests(model, repo_type="model")) == 1


def test_what_main_holds_is_kept_and_not_proposed_again(board: Board) -> None:
    _, planned = eval_results(board.repo_id, "--dry-run")
    qwen = next(p for p in planned["proposals"] if p["model_repo"] == board.qwen)
    ((file),) = qwen["files"]
    # the owner merged it: main holds the entry, so nothing is proposed to this model
    commit_model(board.qwen, {file["path"]: file["text"].encode()})
    # the other model's owner keeps a result of their own and an older one of this board
    path = file["path"]
    own = {"dataset": {"id": "cais/hle", "task_id": "default"}, "value": 12.5, "notes": "mine"}
    older = {
        "dataset": {"id": board.dataset, "task_id": "vqa_test"},
        "value": 0.1,
        "source": {"url": "https://example.org/old", "name": board.repo_id},
    }
    commit_model(board.small, {path: yaml.safe_dump([own, older]).encode()})
    code, report = eval_results(board.repo_id, token=SUBMITTER_TOKEN)
    assert code == 0, report
    assert [h["model_repo"] for h in report["already_held"]] == [board.qwen]
    (proposal,) = report["proposals"]
    assert proposal["model_repo"] == board.small
    entries = entries_of(proposal["files"][0]["text"])
    assert [(e.dataset_id, e.value) for e in entries] == [("cais/hle", 12.5), (board.dataset, 0.5)]
    assert board.hub.pull_requests(board.qwen, repo_type="model") == []


def commit_model(model: str, files: dict[str, bytes]) -> None:
    """The model's owner (org gptnt's maintainer) commits to its main branch."""
    HfApi(token=WRITE_TOKEN).create_commit(
        model,
        [CommitOperationAdd(path, data) for path, data in files.items()],
        commit_message="owner's edit",
        repo_type="model",
    )


def test_a_forged_score_and_an_unreadable_results_file_are_for_a_person(
    board: Board, repo_id: str
) -> None:
    """The board's task table edited by hand (a score raised) is not what the bundle gives:
    nothing of it is proposed; a model's results file that is no list of entries would have
    to be overwritten: nothing is proposed to it. Both exit 1."""
    data = board.hub.file_bytes(repo_id, task_table(TASK)) or b""
    original = pq.read_table(pa.BufferReader(data))
    rows = [
        row | {"ranking_score": 0.97} if row["model_name"] == board.qwen else row
        for row in original.to_pylist()
    ]
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist(rows, schema=original.schema), sink)
    commit_by_hand(repo_id, {task_table(TASK): sink.getvalue().to_pybytes()})
    path = f".eval_results/expert-VQA-{repo_id[-10:]}.yaml"
    commit_model(board.small, {path: b"dataset: [unclosed\n"})
    code, report = eval_results(repo_id, token=SUBMITTER_TOKEN)
    assert code == 1 and report["proposals"] == []
    looked = {(n["reason"], n["model_repo"]): n["detail"] for n in report["not_proposed"]}
    forged = looked[("not-verified", board.qwen)]
    assert "0.97" in forged and "0.75" in forged
    assert "not YAML" in looked[("unreadable-model-file", board.small)]
    for model in (board.qwen, board.small):
        assert board.hub.pull_requests(model, repo_type="model") == []
    human = run_cli("eval-results", "--repo", repo_id, "--dry-run")
    assert human.returncode == 1 and "not-verified" in human.stderr


HOSTILE_RESULTS = {
    "nested": b"[" * 50_000 + b"]" * 50_000,
    "aliased": b"- &a {dataset: {id: x, task_id: y}, value: 1, notes: *a}\n",
    "impossible date": b"- {dataset: {id: x, task_id: y}, value: 1, date: 2026-13-45}\n",
    "not UTF-8": b"- \xff\xfe\n",
}


@pytest.mark.parametrize("kind", sorted(HOSTILE_RESULTS))
def test_a_hostile_results_file_on_a_model_is_named_in_one_line(
    board: Board, repo_id: str, kind: str
) -> None:
    """A model's results file is anyone's to write: YAML nested past PyYAML's recursion, an
    alias (the seed of a structure that expands to billions of items), a date Python cannot
    hold, bytes that are not UTF-8. Each is an unreadable file named with its problem (exit 1),
    never an internal error, and nothing is proposed to that model."""
    path = f".eval_results/expert-VQA-{repo_id[-10:]}.yaml"
    commit_model(board.small, {path: HOSTILE_RESULTS[kind]})
    code, report = eval_results(repo_id, "--dry-run")
    assert code == 1, report
    looked = {(n["reason"], n["model_repo"]): n["detail"] for n in report["not_proposed"]}
    detail = looked[("unreadable-model-file", board.small)]
    assert "not YAML: " in detail and "\n" not in detail
    assert all(p["model_repo"] != board.small for p in report["proposals"])


def test_untrusted_yaml_takes_what_safe_load_takes_without_aliases() -> None:
    assert load_untrusted_yaml(b"a: [1, {b: 2026-01-02}]\n") == {
        "a": [1, {"b": datetime.date(2026, 1, 2)}]
    }
    for text, problem in (
        (b"[" * 50_000 + b"]" * 50_000, "nested too deeply"),
        (b"a: &x [1]\nb: *x\n", "line 2: an alias (*name), which is not accepted"),
        (b"a: 2026-13-45\n", "month must be in 1..12"),
        (b"\xff", "not UTF-8 text"),
        (b"a: [\n", "line 2: expected the node content, but found '<stream end>'"),
    ):
        with pytest.raises(UnreadableYaml) as refused:
            load_untrusted_yaml(text)
        assert str(refused.value) == problem


def test_a_revision_the_task_no_longer_accepts_is_stale(board: Board, repo_id: str) -> None:
    redefined = run_cli(
        "tasks", "define", TASK, "--repo", repo_id, "--dataset", board.dataset,
        "--split", "test", "--metric", METRIC, "--revision", "f" * 40,
        env={"HF_TOKEN": WRITE_TOKEN},
    )  # fmt: skip
    assert redefined.returncode == 0, redefined.stderr
    code, report = eval_results(repo_id, "--dry-run")
    assert code == 0 and report["proposals"] == []
    assert {n["reason"] for n in report["not_proposed"] if n["model_repo"] == board.small} == {
        "stale"
    }


def test_a_model_repository_named_for_one_setup(board: Board, repo_id: str) -> None:
    """A provider's model name names no repository: the maintainer names it, for one setup."""
    gpt = f"gptnt/gpt-5.2-{repo_id[-10:]}"
    board.hub.create_repo(gpt, repo_type="model")
    (setup,) = {b.split("/")[0] for b in board.shown_rows() if b.startswith("gpt-5-2_")}
    code, report = eval_results(repo_id, "--dry-run", "--model-repo", gpt, "--setup", setup)
    assert code == 0, report
    assert sorted(p["model_repo"] for p in report["proposals"]) == sorted(
        [board.qwen, board.small, gpt]
    )
    (mine,) = [p for p in report["proposals"] if p["model_repo"] == gpt]
    assert entries_of(mine["files"][0]["text"])[0].value == 0.9

    alone = run_cli("eval-results", "--repo", repo_id, "--model-repo", gpt, "--dry-run")
    assert alone.returncode == 2 and len(alone.stderr.strip().splitlines()) <= 2
    absent = run_cli(
        "eval-results", "--repo", repo_id, "--model-repo", "gptnt/absent", "--setup", setup,
        "--dry-run",
    )  # fmt: skip
    assert absent.returncode == 2 and "gptnt/absent" in absent.stderr


def test_a_read_token_opens_nothing(board: Board, repo_id: str) -> None:
    code, report = eval_results(repo_id, token=READ_TOKEN)
    assert code == 2 and report["kind"] == "error"
    for model in (board.qwen, board.small):
        assert board.hub.pull_requests(model, repo_type="model") == []


def test_a_dataset_without_eval_yaml_is_no_benchmark(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    plain = Board(hub, repo_id, tmp_path, eval_yaml=False)
    plain.publish("only", [plain.spec(plain.qwen, 0.75)])
    code, report = eval_results(repo_id, "--dry-run")
    assert code == 0 and report["proposals"] == []
    ((skipped),) = report["not_proposed"]
    assert skipped["reason"] == "not-a-benchmark" and skipped["bundle_id"] is None
    unknown = run_cli("eval-results", "--repo", repo_id, "--task", "nope", "--dry-run")
    assert unknown.returncode == 2 and "nope" in unknown.stderr


def test_the_test_hub_lets_anyone_propose_to_a_model_and_validates_eval_yaml(
    hub: HubServer, repo_id: str
) -> None:
    """As the Hub documents (hub-docs eval-results): "Anyone can submit evaluation results to
    any model via Pull Request", while the model's main branch is its owner's; and a
    benchmark's eval.yaml "is validated at push time"."""
    model = f"gptnt/model-{repo_id[-10:]}"
    hub.create_repo(model, repo_type="model")

    def change() -> list[CommitOperationAdd]:  # the client spends an operation once made
        return [CommitOperationAdd(".eval_results/x.yaml", b"[]\n")]

    submitter = HfApi(token=SUBMITTER_TOKEN)
    opened = submitter.create_commit(
        model, change(), commit_message="results", repo_type="model", create_pr=True
    )
    assert opened.pr_num == 1
    assert hub.pull_requests(model, repo_type="model")[0].author == "submitter"
    for api, kwargs in ((submitter, {}), (HfApi(token=READ_TOKEN), {"create_pr": True})):
        with pytest.raises(HfHubHTTPError) as refused:
            api.create_commit(
                model, change(), commit_message="results", repo_type="model", **kwargs
            )
        assert refused.value.response.status_code == 403
    maintainer = HfApi(token=WRITE_TOKEN)
    for bad in (b"name: x\n", b"name: x\ntasks:\n  - id: t\n", b"[unclosed\n"):
        with pytest.raises(HfHubHTTPError) as invalid:
            maintainer.upload_file(
                path_or_fileobj=bad, path_in_repo="eval.yaml", repo_id=repo_id, repo_type="dataset"
            )
        assert invalid.value.response.status_code == 400 and "eval.yaml" in str(invalid.value)
    maintainer.upload_file(
        path_or_fileobj=EVAL_YAML.encode(), path_in_repo="eval.yaml", repo_id=repo_id,
        repo_type="dataset",
    )  # fmt: skip
    assert hub.file_bytes(repo_id, "eval.yaml") == EVAL_YAML.encode()


def test_which_task_of_the_benchmark_a_board_task_is() -> None:
    """By its own id first, else the one task on its split; two on the split is a guess."""
    benchmark = parse_benchmark(EVAL_YAML.encode())
    assert isinstance(benchmark, Benchmark)
    assert task_id_of(benchmark, "expert-vqa", "test") == "vqa_test"
    assert task_id_of(benchmark, "vqa_validation", "test") == "vqa_validation"
    assert task_id_of(benchmark, "expert-vqa", "train") is None
    twice = parse_benchmark(
        b"name: b\ntasks:\n- {id: a, config: x, split: test}\n- {id: b, config: y, split: test}\n"
    )
    assert isinstance(twice, Benchmark) and task_id_of(twice, "t", "test") is None
    assert "tasks" in str(parse_benchmark(b"name: b\n"))
    assert "not YAML" in str(parse_benchmark(b"[unclosed\n"))
