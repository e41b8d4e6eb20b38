"""The release workflow and what names the released version: a tag builds, checks, runs the
installed journey on the very files it then publishes (trusted publishing), and attaches them
to the release; the nightly template and the dataset card name the version that wrote them."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from test_workflow import EXPRESSION, RUNNER_SHELL, load, triggers

from bundler.core.version import VERSION

ROOT = Path(__file__).parent.parent
RELEASE = ROOT / ".github" / "workflows" / "release.yml"


def release() -> dict[str, Any]:
    workflow = yaml.safe_load(RELEASE.read_text())
    assert isinstance(workflow, dict)
    return workflow


def job_steps(workflow: dict[str, Any], job: str) -> list[dict[str, Any]]:
    return list(workflow["jobs"][job]["steps"])


def test_a_version_tag_builds_checks_tests_then_publishes() -> None:
    workflow = release()
    assert triggers(workflow) == {"push": {"tags": ["v*"]}}
    jobs = workflow["jobs"]
    assert jobs["installed-journey"]["needs"] == "build"
    assert jobs["publish"]["needs"] == "installed-journey"
    assert jobs["github-release"]["needs"] == "publish"
    build = " ".join(step.get("run", "") for step in job_steps(workflow, "build"))
    assert "python -m build --sdist --wheel" in build and "twine check --strict" in build
    journey = job_steps(workflow, "installed-journey")
    (test,) = [step for step in journey if "pytest" in step.get("run", "")]
    assert "-m installed" in test["run"] and test["env"]["BUNDLER_TEST_WHEEL"] == "dist"
    # trusted publishing: the only job that may ask for an identity token, and no stored token
    assert jobs["publish"]["permissions"] == {"id-token": "write"}
    assert any(
        s.get("uses", "").startswith("pypa/gh-action-pypi-publish")
        for s in job_steps(workflow, "publish")
    )
    assert "secrets." not in RELEASE.read_text()
    assert workflow["permissions"] == {"contents": "read"}
    for job in jobs.values():
        for step in job["steps"]:
            assert not EXPRESSION.search(step.get("run", "")), step  # values reach scripts via env


def _tag_check(tag: str) -> subprocess.CompletedProcess[str]:
    (step,) = [
        s for s in job_steps(release(), "build") if "does not name version" in s.get("run", "")
    ]
    return subprocess.run(
        [*RUNNER_SHELL, "-c", step["run"]],
        cwd=ROOT,
        env={
            "GITHUB_REF_NAME": tag,
            "PATH": "/usr/bin:/bin:" + str(Path(sys.executable).parent),
        },
        capture_output=True,
        text=True,
        check=False,
    )


def test_a_tag_that_does_not_name_the_version_releases_nothing() -> None:
    assert _tag_check(f"v{VERSION}").returncode == 0
    wrong = _tag_check("v99.0.0")
    assert wrong.returncode == 1
    assert f"does not name version {VERSION}" in wrong.stdout


def test_the_nightly_template_installs_the_version_that_printed_it() -> None:
    env = load()["jobs"]["sync"]["env"]
    assert env["BUNDLER_PACKAGE"] == f"statics-bundler[charts]=={VERSION}"
    text = (ROOT / "templates" / "nightly-sync.yml").read_text()
    # the documented line for an unreleased checkout: a git URL at a commit
    assert re.search(r"statics-bundler\[charts\] @ git\+https://\S+@COMMIT", text)
