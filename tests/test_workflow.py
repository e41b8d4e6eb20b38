"""The nightly workflow template: parsed as GitHub Actions would read it, and its bundler
command lines and its sync step run, as the runner would run them (bash -eo pipefail), against
the local Hub server, with no stored token: the job's OIDC id token (from a GitHub-style
endpoint, tests/oidc_provider.py) exchanged for a token to the one repository its Trusted
Publisher is registered on."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import WRITE_TOKEN
from factory import RunSpec, write_run, write_tree
from helpers import BUNDLER, cli_env
from hubserver import Fault, HubServer
from oidc_provider import WORKFLOW_CLAIMS, GitHubOidc

from bundler.core.version import VERSION

WORKFLOW = Path(__file__).parent.parent / "templates" / "nightly-sync.yml"
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
RUNNER_SHELL = ["bash", "--noprofile", "--norc", "-eo", "pipefail"]
"""How GitHub's ubuntu runners run a `run:` script by default."""


def load() -> dict[str, Any]:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    assert isinstance(workflow, dict)
    return workflow


def triggers(workflow: dict[str, Any]) -> dict[str, Any]:
    # YAML 1.1 reads the bare key `on` as the boolean true.
    value = workflow.get("on", workflow.get(True))
    assert isinstance(value, dict)
    return value


def steps(workflow: dict[str, Any]) -> list[dict[str, Any]]:
    return list(workflow["jobs"]["sync"]["steps"])


def sync_step(workflow: dict[str, Any]) -> dict[str, Any]:
    (step,) = [step for step in steps(workflow) if "bundler sync" in step.get("run", "")]
    return step


def bundler_lines(script: str) -> list[str]:
    """The bundler command lines of a script (continuations joined), without what the shell
    does with their exit status."""
    joined = re.sub(r"\\\n\s*", " ", script)
    lines = [line.strip() for line in joined.splitlines()]
    return [line.split(" || ")[0] for line in lines if re.match(r"bundler\b", line)]


def substitute(value: str, secrets: dict[str, str]) -> str:
    """Evaluate the only expressions the template may use in env: repository secrets."""

    def evaluate(match: re.Match[str]) -> str:
        name = match.group(1)
        assert name.startswith("secrets."), f"unexpected expression {name!r} in env"
        return secrets[name.removeprefix("secrets.")]

    return EXPRESSION.sub(evaluate, str(value))


class Runner:
    """Runs the workflow's scripts the way the Actions runner would, in a work folder."""

    def __init__(
        self, workflow: dict[str, Any], work: Path, github: GitHubOidc, **overrides: str
    ) -> None:
        self.workflow = workflow
        self.work = work
        self.output = work / "github_output"
        secrets = {"HF_TOKEN": WRITE_TOKEN}
        step_env = sync_step(workflow).get("env", {})
        env = {**workflow["jobs"]["sync"]["env"], **step_env}
        self.env = {key: substitute(value, secrets) for key, value in env.items()}
        if workflow["jobs"]["sync"].get("permissions", {}).get("id-token") == "write":
            self.env |= github.env()  # what the runner gives such a job, and only such a job
        self.env |= overrides
        self.env |= {
            "GITHUB_OUTPUT": str(self.output),
            "PATH": f"{BUNDLER.parent}:{cli_env()['PATH']}",
        }

    def run(self, script: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*RUNNER_SHELL, "-c", script],
            cwd=self.work,
            env=cli_env(self.env),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    def sync(self) -> subprocess.CompletedProcess[str]:
        self.output.write_text("")
        return self.run(sync_step(self.workflow)["run"])

    @property
    def step_output(self) -> str:
        return self.output.read_text()

    def report(self) -> dict[str, Any]:
        return json.loads((self.work / self.env["REPORT_FILE"]).read_text())


@pytest.fixture
def github(hub: HubServer, repo_id: str) -> Iterator[GitHubOidc]:
    """The harness repository's GitHub OIDC endpoint, its nightly-sync workflow registered on
    the Hub as the Trusted Publisher of the leaderboard's repository (step 1. of the
    template)."""
    hub.add_trusted_publisher(
        f"datasets/{repo_id}",
        {key: WORKFLOW_CLAIMS[key] for key in ("repository", "workflow", "ref")},
    )
    with GitHubOidc(hub).serving() as endpoint:
        yield endpoint


@pytest.fixture
def runner(repo_id: str, tmp_path: Path, github: GitHubOidc) -> Runner:
    workflow = load()
    # what the maintainer sets in the template (step 1.)
    resource = {"HF_OIDC_RESOURCE": f"datasets/{repo_id}"}
    runner = Runner(workflow, tmp_path, github, SYNC_RETRY_SECONDS="0", **resource)
    # what the template asks to commit beside it: the nightly's repeated options
    config = f'[sync]\nrepo = "{repo_id}"\nsubmitter = {{ name = "nightly" }}\n'
    (tmp_path / runner.env["BUNDLER_CONFIG"]).write_text(config)
    write_tree(tmp_path / runner.env["OUTPUT_ROOT"], [RunSpec(rows=3), RunSpec(model="m2", rows=2)])
    return runner


def test_the_workflow_is_scheduled_dispatchable_and_keeps_the_report() -> None:
    workflow = load()
    on = triggers(workflow)
    assert on["schedule"] and all(entry["cron"].split() for entry in on["schedule"])
    assert "workflow_dispatch" in on
    step = sync_step(workflow)
    assert "HF_OIDC_RESOURCE" not in workflow["jobs"]["sync"]["env"]  # only where needed
    (keep,) = [
        s for s in steps(workflow) if s.get("uses", "").startswith("actions/upload-artifact")
    ]
    assert keep["if"] == "always()"
    assert keep["with"]["path"] == "${{ env.REPORT_FILE }}"
    install = next(s for s in steps(workflow) if "pip install" in s.get("run", ""))
    assert steps(workflow).index(install) < steps(workflow).index(step)
    for script in (s["run"] for s in steps(workflow) if "run" in s):
        # Values reach scripts through env only: an expression in a script is an injection risk.
        assert not EXPRESSION.search(script), script
    commands = [line for s in steps(workflow) for line in bundler_lines(s.get("run", ""))]
    assert [line.split()[1] for line in commands] == ["--version", "sync"]
    assert '--report "$REPORT_FILE"' in commands[1]
    assert '--config "$BUNDLER_CONFIG"' in commands[1] and "--resolve-rows" in commands[1]


def test_the_job_stores_no_token_and_keeps_the_stored_token_way_commented() -> None:
    """The job's own OIDC id token stands for a stored secret (Trusted Publishers): no secret
    at all in the workflow, the permission to mint the id token on the job alone, and the
    resource a placeholder the maintainer replaces. The stored-token way, for a CI without
    OIDC, is there as a comment: uncommented, it is the secret in the sync step alone."""
    workflow = load()
    job = workflow["jobs"]["sync"]
    assert job["permissions"] == {"contents": "read", "id-token": "write"}
    assert workflow["permissions"] == {"contents": "read"}  # no other job would get it
    step = sync_step(workflow)
    assert step["env"] == {"HF_OIDC_RESOURCE": "datasets/OWNER/NAME"}
    text = WORKFLOW.read_text()
    assert "secrets." not in "".join(line.split("#")[0] for line in text.splitlines())
    (commented,) = [line for line in text.splitlines() if "secrets.HF_TOKEN" in line]
    uncommented = text.replace(commented, commented.replace("# ", "", 1)).replace(
        "          HF_OIDC_RESOURCE: datasets/OWNER/NAME", "          # (deleted)"
    )
    stored = yaml.safe_load(uncommented)
    assert sync_step(stored)["env"] == {"HF_TOKEN": "${{ secrets.HF_TOKEN }}"}


def test_without_the_permission_the_sync_step_fails_naming_it(
    runner: Runner, hub: HubServer, repo_id: str
) -> None:
    """A job without `id-token: write` gets no id-token endpoint from the runner: exit 2,
    one line saying so, and nothing published."""
    for key in ("ACTIONS_ID_TOKEN_REQUEST_URL", "ACTIONS_ID_TOKEN_REQUEST_TOKEN"):
        del runner.env[key]
    result = runner.sync()
    assert result.returncode == 2
    assert "exit_code=2" in runner.step_output
    assert "permissions: id-token: write" in result.stderr
    assert not [p for p in hub.list_files(repo_id) if p.endswith(".tar.zst")]


def test_the_template_ships_in_the_installed_package() -> None:
    from importlib.resources import files

    shipped = files("bundler.templates").joinpath("nightly-sync.yml").read_text()
    assert shipped == WORKFLOW.read_text()
    printed = subprocess.run(
        [str(BUNDLER), "template", "nightly-sync"], capture_output=True, text=True, check=False
    )
    assert printed.returncode == 0 and printed.stdout == shipped


def test_its_bundler_command_lines_run_against_the_hub(
    runner: Runner, hub: HubServer, repo_id: str
) -> None:
    commands = [line for s in steps(runner.workflow) for line in bundler_lines(s.get("run", ""))]
    version, sync = (runner.run(line) for line in commands)
    assert version.returncode == 0 and version.stdout == f"bundler {VERSION}\n"
    assert sync.returncode == 0, sync.stderr
    for secret in (WRITE_TOKEN, *hub.exchanged_tokens()):
        assert secret not in sync.stdout + sync.stderr
    assert hub.commits(repo_id)[0].author == "[OIDC]"  # the Hub's name for a publisher's push
    report = runner.report()
    assert report["exit_code"] == 0 and report["counts"]["published"] == 2
    assert len([p for p in hub.list_files(repo_id) if p.endswith(".tar.zst")]) == 2


def test_the_sync_step_succeeds_and_records_the_exit_code(runner: Runner) -> None:
    result = runner.sync()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "exit_code=0" in runner.step_output
    assert runner.report()["counts"]["published"] == 2
    again = runner.sync()  # the next night, nothing new
    assert again.returncode == 0
    assert runner.report()["counts"]["already_there"] == 2


def test_the_sync_step_fails_the_job_when_a_person_must_look(runner: Runner) -> None:
    broken = write_run(runner.work / runner.env["OUTPUT_ROOT"], RunSpec(model="broken", rows=2))
    (broken / "metrics.json").unlink()
    result = runner.sync()
    assert result.returncode == 1
    assert "::error::bundler sync exited 1" in result.stdout
    assert "exit_code=1" in runner.step_output
    assert runner.report()["counts"]["published"] == 2  # the good bundles still went up


def test_the_sync_step_retries_a_temporary_failure_then_ends_with_a_warning(
    runner: Runner, hub: HubServer
) -> None:
    hub.inject("*", r"/api/", Fault.status(503), times=1000)
    runner.env["SYNC_ATTEMPTS"] = "2"
    result = runner.sync()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "temporary failure (exit 75), attempt 1 of 2" in result.stdout
    assert "still a temporary failure after 2 attempts" in result.stdout
    assert result.stderr.count("error: ") == 2  # bundler ran twice
    assert "exit_code=75" in runner.step_output
    assert runner.report()["exit_code"] == 75

    runner.env |= {"SYNC_ATTEMPTS": "1", "SYNC_FAIL_ON_TEMPORARY": "true"}
    strict = runner.sync()
    assert strict.returncode == 75
    assert "attempt 1 of 1" not in strict.stdout  # no pause after the last attempt


def test_ci_runs_exactly_the_readme_test_command_with_ruff_and_mypy() -> None:
    root = Path(__file__).parent.parent
    readme = (root / "README.md").read_text()
    match = re.search(r"exactly what CI runs.*?```bash\n(.+?)\n```", readme, re.DOTALL)
    assert match is not None
    command = match.group(1)
    ci_lines = (root / ".ci" / "run").read_text().strip().splitlines()
    assert ci_lines[-1] == command
    for check in ("ruff check bundler tests", "ruff format --check bundler tests", "mypy"):
        assert f"&& {check} &&" in command
    assert command.endswith("&& pytest")
