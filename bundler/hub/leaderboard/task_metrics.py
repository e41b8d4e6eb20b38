"""The metrics a task's bundles on a branch hold, read from the all-tasks table: each row keeps
its bundle's flattened metrics (`TableRow.metrics`), so a task's definition is checked against
what its bundles have without downloading one bundle.

Why check: a definition naming a metric no bundle has (a typo) ranks every entry `-`, and the
card and review then say nothing is wrong. A metric counts when some row of the task has a
number under that name: the board ranks by numbers only (`TaskScoring.value`).
"""

from __future__ import annotations

import difflib

import pyarrow.compute as pc

from bundler.core.rule_errors import UnknownMetric
from bundler.hub.leaderboard.columns import decoded
from bundler.hub.leaderboard.tables import AllTasksTable, TablePart


def numeric_metrics(table: AllTasksTable, task: str, wanted: str | None = None) -> set[str]:
    """The metric names with a number in some row of `task`, one part at a time (bounded
    memory), the parts already read first; reading stops at the first part whose rows have
    `wanted`, so accepting a metric costs a part or so, and only naming what the rows have
    (a refusal) reads every part that holds the task."""
    found: set[str] = set()
    parts = sorted(table.parts.values(), key=lambda part: not part.fetched)
    for part in parts:
        found |= _part_metrics(part, task)
        if wanted is not None and wanted in found:
            break
    return found


def _part_metrics(part: TablePart, task: str) -> set[str]:
    if not pc.any(pc.equal(part.keys().column("task_name"), task)).as_py():
        return set()
    rows = decoded(part.data, ["task_name", "metrics"])
    metrics = rows.filter(pc.equal(rows.column("task_name"), task)).column("metrics")
    leaves = pc.list_flatten(metrics)
    numbered = leaves.filter(pc.is_valid(pc.struct_field(leaves, "number")))
    return set(pc.unique(pc.struct_field(numbered, "name")).to_pylist())


def checked_metric(table: AllTasksTable, task: str, metric: str, revision: str) -> str | None:
    """Check a definition of `task` ranked by `metric` against the task's bundles on
    `revision`: UnknownMetric when it has bundles and none has a number under that name
    (naming the metrics they have); a warning when it has no bundle yet (nothing to check
    against); None when some bundle has the metric."""
    if task not in table.tallies():
        return (
            f"task {task} has no bundle on {revision} yet: its metric {metric} is taken as "
            "written, unchecked; a bundle that names it otherwise will show no score"
        )
    known = numeric_metrics(table, task, metric)
    if metric in known:
        return None
    close = difflib.get_close_matches(metric, sorted(known), n=1)
    raise UnknownMetric(task, metric, revision, sorted(known), close[0] if close else None)
