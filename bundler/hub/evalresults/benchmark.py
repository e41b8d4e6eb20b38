"""A benchmark dataset as the Hub knows one: the `eval.yaml` at its root, naming its tasks.

hub-docs `docs/hub/eval-results.md`, "Registering a Benchmark": `name`, `description`,
`evaluation_framework` and `tasks`, a list of `{id, config, split}` (the dataset's config and
split each task is measured on). An entry of a model's `.eval_results/*.yaml` names the task by
that `id` (`dataset.task_id`), so the leaderboard's task is proposed only where the file names
it. Pure: the bytes come from `bundler.hub.evalresults.propose`.
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field, ValidationError

from bundler.core.model import Model
from bundler.core.yamltext import UnreadableYaml, load_untrusted_yaml

EVAL_YAML = "eval.yaml"
MAX_EVAL_YAML_BYTES = 1 << 20
"""An eval.yaml is a few hundred bytes (a name, a description, a few tasks); anything near
this is not one and is not read further."""


class BenchmarkTask(Model):
    """One task of a benchmark, as its eval.yaml lists it."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    id: str = Field(min_length=1)
    config: str | None = None
    split: str | None = None


class Benchmark(Model):
    """A benchmark dataset's eval.yaml: what the Hub's leaderboard of it is called, and its
    tasks (other keys are the Hub's, and not read)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    name: str = Field(min_length=1)
    tasks: list[BenchmarkTask] = Field(min_length=1)


def parse_benchmark(data: bytes) -> Benchmark | str:
    """The eval.yaml of these bytes, or why they are none (one line)."""
    try:
        loaded: Any = load_untrusted_yaml(data)
    except UnreadableYaml as error:
        return f"{EVAL_YAML} is not YAML: {error}"
    try:
        return Benchmark.model_validate(loaded)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the file"
        return f"{EVAL_YAML} is not valid: {where}: {first['msg']}"


def task_id_of(benchmark: Benchmark, task: str, split: str) -> str | None:
    """The id of the benchmark's task that the leaderboard's `task` (run on `split`) is: the
    task of that very id, else the one task measured on `split`; None when the file names no
    such task, or several (which one would be a guess)."""
    named = [t.id for t in benchmark.tasks if t.id == task]
    if named:
        return named[0]
    on_split = [t.id for t in benchmark.tasks if t.split == split]
    return on_split[0] if len(on_split) == 1 else None
