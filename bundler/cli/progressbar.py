"""The progress bar drawn on a terminal while a long command works.

A module of its own so that rich's progress machinery is imported only when a bar is drawn:
a command whose stderr is a log pays nothing for it.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from bundler.cli.console import shown
from bundler.core.progress import Unit


class _CountColumn(ProgressColumn):
    """`3/7 predictions` (the task's unit), `1.2/9.5 MB` for bytes; `3 predictions` while the
    total is not known yet."""

    def __init__(self) -> None:
        super().__init__()
        self._bytes = DownloadColumn()

    def render(self, task: Task) -> Text:
        unit = task.fields.get("unit", "items")
        if unit == "bytes":
            return self._bytes.render(task)
        total = "" if task.total is None else f"/{int(task.total)}"
        return Text(f"{int(task.completed)}{total} {unit}", style="progress.download")


class ProgressBar:
    """A ProgressSink drawn as a bar on a terminal console (see `report.progress_on`)."""

    def __init__(self, console: Console) -> None:
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            _CountColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self._task: Any = None

    def __enter__(self) -> ProgressBar:
        self._progress.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._progress.stop()

    def begin(self, label: str, total: int | None, *, unit: Unit = "items") -> None:
        if self._task is not None:
            self._progress.remove_task(self._task)
        self._task = self._progress.add_task(shown(label), total=total, unit=unit)

    def advance(self, steps: int = 1) -> None:
        if self._task is not None:
            self._progress.advance(self._task, steps)
