"""`bundler tasks define`: a maintainer's commit of one task's definition
(`bundler.hub.tasks.definitions`), with the tables and card ranked by it."""

from __future__ import annotations

from huggingface_hub import CommitOperationAdd
from pydantic import Field

from bundler.core.errors import UsageError
from bundler.core.model import Model
from bundler.core.naming import SAFE_TASK_NAME
from bundler.hub.client.access import require_card
from bundler.hub.client.commit import Operation, PlannedCommit, commit_replanned
from bundler.hub.client.retry import COMMIT_ATTEMPTS, COMMIT_RETRY_SECONDS
from bundler.hub.client.session import HubSession
from bundler.hub.leaderboard.branch import read_branch, table_operations
from bundler.hub.leaderboard.chart import not_drawn
from bundler.hub.leaderboard.task_metrics import checked_metric
from bundler.hub.repo.paths import TASKS_FILE
from bundler.hub.tasks.definitions import TaskDefinition, TaskDefinitions


class DefineReport(Model):
    """What `define_task` did."""

    repo_id: str
    revision: str
    task: str
    definition: TaskDefinition
    changed: bool = False
    commit: str | None = None
    charts_not_drawn: list[str] = Field(default_factory=list)
    """Charts the commit went without, each with why (matplotlib failed to draw it)."""
    warnings: list[str] = Field(default_factory=list)
    """What the definition could not be checked against: the task has no bundle on the
    branch yet, so its metric is taken on trust."""

    @property
    def exit_code(self) -> int:
        return 0


def define_task(
    session: HubSession, task: str, definition: TaskDefinition, revision: str = "main"
) -> DefineReport:
    """Write `task`'s definition into the task definitions on `revision`, with the tables and
    card ranked by it, in one commit naming its parent (a concurrent commit: read again, and
    planned again). Needs write access,
    checked first; nothing is committed when the definition is already that one. The metric
    is checked against the task's bundles on the branch (`checked_metric`): UnknownMetric when
    none has it, a warning when there is none yet."""
    if not SAFE_TASK_NAME.fullmatch(task):
        raise UsageError(f"{task!r} is not a safe task name")
    if revision.startswith("refs/pr/"):
        raise UsageError("the task definitions live on a branch, never in a pull request")
    require_card(session.rights())
    report = DefineReport(
        repo_id=session.repo_id, revision=revision, task=task, definition=definition
    )

    def plan() -> PlannedCommit | None:
        state = read_branch(session, revision)
        warning = checked_metric(state.leaderboard, task, definition.metric, revision)
        report.warnings = [warning] if warning is not None else []
        current = state.definitions
        if current.get(task) == definition:
            return None
        if (twin := current.twin_of(task)) is not None:
            raise UsageError(
                f"{task!r} is a twin of the defined task {twin!r} (the same name but for letter "
                "case or Unicode forms): one task, one name",
                hint=f"define {twin!r} again to change its definition",
            )
        state.definitions = TaskDefinitions(tasks={**current.tasks, task: definition})
        report.changed = True
        operations: list[Operation] = [CommitOperationAdd(TASKS_FILE, state.definitions.to_bytes())]
        operations += table_operations(session, state)
        report.charts_not_drawn = not_drawn(state.undrawn)
        return PlannedCommit(
            revision=revision,
            parent=state.head,
            operations=operations,
            summary=f"Define task {task}: {definition.hf_repo_id} split {definition.split}",
            description=f"Ranked by {definition.metric}, {definition.direction} is better.",
            doing=f"committing {TASKS_FILE}",
            write_hint="defining tasks needs a token with write access to the repository",
            files_before=state.file_count(),
        )

    info = commit_replanned(
        session, plan, attempts=COMMIT_ATTEMPTS, retry_wait=COMMIT_RETRY_SECONDS
    )
    if info is not None:
        report.commit = info.oid
    return report
