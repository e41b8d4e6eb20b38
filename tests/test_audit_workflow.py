"""The leaderboard-audit workflow template: parsed as GitHub Actions reads it (a matrix of N
runners, then a merge job fed by their artifacts), and its scripts run as the runner runs them
(bash -eo pipefail), against the local Hub server: the pin job's commit, every shard of the
matrix, the artifacts carried from the shards to the merge, and the merge's verdict."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from factory import RunSpec
from helpers import BUNDLER, cli_env
from hubserver import HubServer
from test_audit import forged_score, table, with_rows
from test_card_refresh import commit_by_hand
from test_upload import make_bundles, publish
from test_workflow import EXPRESSION, RUNNER_SHELL, bundler_lines, triggers

from bundler.hub.repo.paths import table_part

WORKFLOW = Path(__file__).parent.parent / "templates" / "leaderboard-audit.yml"


def load() -> dict[str, Any]:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    assert isinstance(workflow, dict)
    return workflow


def step(job: dict[str, Any], name: str) -> dict[str, Any]:
    (found,) = [s for s in job["steps"] if s.get("name") == name]
    return found


def uses(job: dict[str, Any], action: str) -> list[dict[str, Any]]:
    return [s for s in job["steps"] if s.get("uses", "").startswith(action)]


def test_a_matrix_of_shards_then_a_merge_fed_by_their_artifacts() -> None:
    workflow = load()
    on = triggers(workflow)
    assert on["schedule"] and "workflow_dispatch" in on
    jobs = workflow["jobs"]
    assert list(jobs) == ["pin", "audit", "merge"]
    shards = jobs["audit"]["strategy"]["matrix"]["shard"]
    assert shards == list(range(1, int(workflow["env"]["SHARDS"]) + 1))
    assert jobs["audit"]["strategy"]["fail-fast"] is False  # one shard's trouble stops none
    assert jobs["audit"]["needs"] == "pin" and jobs["merge"]["needs"] == ["pin", "audit"]
    assert jobs["merge"]["if"].startswith("always()")  # a failed shard is named, not hidden
    (kept,) = uses(jobs["audit"], "actions/upload-artifact")
    assert kept["if"] == "always()" and kept["with"]["name"] == "audit-shard-${{ matrix.shard }}"
    (fetched,) = uses(jobs["merge"], "actions/download-artifact")
    assert fetched["with"]["pattern"] == "audit-shard-*"
    assert "merge-multiple" not in fetched["with"]  # each shard's report in a folder of its own
    lines = [
        line
        for job in jobs.values()
        for s in job["steps"]
        for line in bundler_lines(s.get("run", ""))
    ]
    assert [line.split()[1] for line in lines] == ["--version", "audit", "audit"]
    assert '--shard "$SHARD/$SHARDS"' in lines[1] and '--revision "$COMMIT"' in lines[1]
    assert lines[2].startswith("bundler audit --merge")
    for job in jobs.values():
        for s in job["steps"]:
            # values reach scripts through env only: an expression in a script is an injection
            assert not EXPRESSION.search(s.get("run", "")), s
    assert "HF_TOKEN" not in json.dumps(workflow)  # no secret, unless uncommented
    assert "# HF_TOKEN: ${{ secrets.HF_TOKEN }}" in WORKFLOW.read_text()


def test_the_template_ships_in_the_installed_package() -> None:
    from importlib.resources import files

    shipped = files("bundler.templates").joinpath("leaderboard-audit.yml").read_text()
    assert shipped == WORKFLOW.read_text()
    printed = subprocess.run(
        [str(BUNDLER), "template", "leaderboard-audit"], capture_output=True, text=True
    )
    assert printed.returncode == 0 and printed.stdout == shipped


class Runner:
    """Runs the workflow's scripts as the Actions runner would: each job in a work folder of
    its own, the workflow's and the job's env, the expressions in env evaluated."""

    def __init__(self, workflow: dict[str, Any], root: Path, repo_id: str) -> None:
        self.workflow, self.root = workflow, root
        self.values = {"inputs.revision || 'main'": "main"}
        self.env = {k: str(v) for k, v in workflow["env"].items()} | {"LEADERBOARD": repo_id}

    def run(
        self, job: str, name: str, work: Path, **values: str
    ) -> subprocess.CompletedProcess[str]:
        definition = self.workflow["jobs"][job]
        script = step(definition, name)
        env = {**definition.get("env", {}), **script.get("env", {})}
        evaluated = {key: self.evaluate(str(value), values) for key, value in env.items()}
        work.mkdir(parents=True, exist_ok=True)
        output = work / "github_output"
        output.write_text("")
        return subprocess.run(
            [*RUNNER_SHELL, "-c", script["run"]],
            cwd=work,
            env=cli_env(
                self.env
                | evaluated
                | {"GITHUB_OUTPUT": str(output), "PATH": f"{BUNDLER.parent}:{cli_env()['PATH']}"}
            ),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    def evaluate(self, value: str, values: dict[str, str]) -> str:
        known = self.values | values
        return EXPRESSION.sub(lambda match: known[match.group(1)], value)

    def outputs(self, work: Path) -> dict[str, str]:
        lines = (work / "github_output").read_text().splitlines()
        return dict(line.split("=", 1) for line in lines)

    def audit(
        self,
    ) -> tuple[list[subprocess.CompletedProcess[str]], subprocess.CompletedProcess[str]]:
        """The pin job, every shard of the matrix, their artifacts downloaded as
        actions/download-artifact lays them out (a folder per artifact), then the merge."""
        pin = self.run("pin", "Pin the commit to audit", self.root / "pin")
        assert pin.returncode == 0, pin.stderr
        commit = self.outputs(self.root / "pin")["commit"]
        reports = self.root / "merge" / "reports"
        shards = []
        for shard in self.workflow["jobs"]["audit"]["strategy"]["matrix"]["shard"]:
            work = self.root / f"shard-{shard}"
            values = {"matrix.shard": str(shard), "needs.pin.outputs.commit": commit}
            shards.append(self.run("audit", "Audit this shard", work, **values))
            artifact = reports / f"audit-shard-{shard}"
            artifact.mkdir(parents=True)
            shutil.copy(work / self.env["REPORT_FILE"], artifact)
        merge = self.run("merge", "Merge the shards' reports into one verdict", self.root / "merge")
        return shards, merge

    def verdict(self) -> dict[str, Any]:
        return json.loads((self.root / "merge" / "audit.json").read_text())


@pytest.mark.timeout(600)
def test_the_shards_and_the_merge_run_against_the_hub(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    """A board with a forged score: every shard's step succeeds (its findings are the
    merge's to judge), and the merge's fails the job, with the finding in its verdict."""
    specs = [RunSpec(task=task, model=f"m-{task}", rows=2) for task in ("alpha", "beta")]
    publish(make_bundles(tmp_path / "board", specs), repo_id)
    original = table(hub, repo_id)
    rows = original.to_pylist()
    commit_by_hand(
        repo_id, {table_part(0): with_rows(original, [forged_score(rows[0], 0.99), *rows[1:]])}
    )
    runner = Runner(load(), tmp_path / "run", repo_id)
    shards, merge = runner.audit()
    assert all(s.returncode == 0 for s in shards), [s.stderr[-2000:] for s in shards]
    assert merge.returncode == 1, merge.stderr  # the job fails: a person must look
    verdict = runner.verdict()
    assert verdict["merge"]["merged"] == list(range(1, 9)) and verdict["merge"]["missing"] == []
    assert verdict["commit"] == hub.commits(repo_id)[0].oid
    assert {f["field"] for f in verdict["findings"]} == {"metrics", "metrics_json", "score"}
    assert re.search(r"merged the reports of 8 of 8 shard\(s\)", merge.stderr)
