"""The leaderboard's tasks, as its maintainers define them: `leaderboard/tasks.json`.

```json
{
  "version": 1,
  "tasks": {
    "maze": {
      "hf_repo_id": "GPTNT/statics",
      "split": "test",
      "metric": "exact_match.accuracy",
      "direction": "higher",
      "revisions": ["<40-hex commit sha>", "..."]
    }
  }
}
```

Per task: the dataset repository and split a bundle must have run on, the flattened metric
(`scorer.key`) the card ranks by and whether `higher` or `lower` is better, and the dataset
revisions accepted (full commit shas; empty or absent: any). Only a maintainer's commit
changes the file (`bundler tasks define`); a pull request touching it fails review's `layout`
check. A task without a definition is still shown, ranked by its earliest bundle's first
numeric metric, with a warning on the card and in review.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import TYPE_CHECKING, Literal

from pydantic import ConfigDict, Field, ValidationError, field_validator

from bundler.core.errors import HubError
from bundler.core.limits import MAX_TASKS_FILE_BYTES
from bundler.core.model import Model
from bundler.core.naming import SAFE_TASK_NAME
from bundler.hub.repo.paths import TASKS_FILE

if TYPE_CHECKING:
    from bundler.hub.client.session import HubSession
    from bundler.local.schema import StaticsIdentity

_FULL_SHA = re.compile(r"[0-9a-f]{40}")
Direction = Literal["higher", "lower"]


MetricKind = Literal["score", "proportion"]


class TaskDefinition(Model):
    model_config = ConfigDict(frozen=True, extra="forbid")

    hf_repo_id: str = Field(min_length=3, max_length=200, pattern=r"^[\w.-]+/[\w.-]+$")
    split: str = Field(min_length=1, max_length=200)
    metric: str = Field(min_length=1, max_length=1024)
    direction: Direction = "higher"
    revisions: list[str] = Field(default_factory=list)
    metric_kind: MetricKind = "score"
    """`proportion`: the metric is a per-row proportion (correct rows over rows present), so
    each entry gets a 95% Wilson interval and the board ranks by them
    (bundler.hub.leaderboard.ranking); `score`: any other number, ranked by its value."""

    @field_validator("revisions")
    @classmethod
    def _full_shas(cls, values: list[str]) -> list[str]:
        for value in values:
            if not _FULL_SHA.fullmatch(value):
                raise ValueError(f"{value!r} is not a full (40 hex) commit sha")
        return values

    def mismatch(self, statics: StaticsIdentity) -> str | None:
        """Why a bundle run on `statics` is not a result of this task; None when it is."""
        problems = []
        if statics.hf_repo_id != self.hf_repo_id:
            problems.append(f"dataset {statics.hf_repo_id}, not {self.hf_repo_id}")
        if statics.dataset_split != self.split:
            problems.append(f"split {statics.dataset_split}, not {self.split}")
        if self.revisions and statics.resolved_revision not in self.revisions:
            shown = statics.resolved_revision or "unpinned"
            problems.append(f"revision {shown} is not one of the {len(self.revisions)} accepted")
        return "; ".join(problems) or None


class TaskDefinitions(Model):
    model_config = ConfigDict(extra="forbid")

    version: Literal[1] = 1
    tasks: dict[str, TaskDefinition] = Field(default_factory=dict)
    require_signature: bool = False
    """Every bundle must be signed: an upload to the branch refuses an unsigned one, and review
    and audit fail it rather than warn (bundler.hub.maintain.signers_require says where)."""

    @field_validator("tasks")
    @classmethod
    def _safe_names(cls, tasks: dict[str, TaskDefinition]) -> dict[str, TaskDefinition]:
        for name in tasks:
            if not SAFE_TASK_NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not a safe task name")
        return tasks

    def get(self, task: str) -> TaskDefinition | None:
        return self.tasks.get(task)

    def twin_of(self, task: str) -> str | None:
        """The defined task `task` is a twin of: another name, equal to it under Unicode
        compatibility normalisation (NFKC) and case folding. Twins cannot both have a table
        (`leaderboard/tasks/<task>.parquet`) on a case-insensitive file system, and a reader
        takes them for one task."""
        folded = task_fold(task)
        return next(
            (name for name in self.tasks if name != task and task_fold(name) == folded), None
        )

    def to_bytes(self) -> bytes:
        text = json.dumps(self.model_dump(mode="json"), indent=2, sort_keys=True)
        return (text + "\n").encode("ascii")

    @classmethod
    def parse(cls, data: bytes) -> TaskDefinitions:
        try:
            return cls.model_validate_json(data)
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise HubError(f"{TASKS_FILE} is not valid: {where}: {first['msg']}") from None


def read_definitions(session: HubSession, revision: str) -> TaskDefinitions:
    """The definitions on `revision` (none defined when the file is absent)."""
    listed = session.paths_info([TASKS_FILE], revision)
    if TASKS_FILE not in listed:
        return TaskDefinitions()
    return TaskDefinitions.parse(session.read_file(TASKS_FILE, revision, MAX_TASKS_FILE_BYTES))


def task_fold(task: str) -> str:
    """What two task names that are one task to a person share (see `twin_of`)."""
    return unicodedata.normalize("NFKC", task).casefold()


class TaskListing(Model):
    """The task definitions a branch holds, as `bundler tasks list` shows them."""

    repo_id: str
    revision: str
    tasks: dict[str, TaskDefinition]

    @property
    def exit_code(self) -> int:
        return 0


def list_definitions(session: HubSession, revision: str = "main") -> TaskListing:
    """The definitions on `revision`, for anyone who may read the repository."""
    definitions = read_definitions(session, revision)
    return TaskListing(repo_id=session.repo_id, revision=revision, tasks=definitions.tasks)
