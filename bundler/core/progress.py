"""How long-running library calls report progress without depending on a terminal.

The library reports through this small protocol; the CLI renders it with rich, and a caller
that does not care passes nothing.
"""

from __future__ import annotations

from typing import Literal, Protocol

Unit = Literal["items", "bytes", "predictions", "bundles"]
"""What a step counts; the bar shows it beside the totals (`3/7 predictions`, `1.2/9.5 MB`)."""


class ProgressSink(Protocol):
    def begin(self, label: str, total: int | None, *, unit: Unit = "items") -> None:
        """A new unit of work starts; `total` steps (items, or bytes) if known."""

    def advance(self, steps: int = 1) -> None:
        """Some steps of the current unit are done."""


class NoProgress:
    def begin(self, label: str, total: int | None, *, unit: Unit = "items") -> None:
        pass

    def advance(self, steps: int = 1) -> None:
        pass
