"""Stop signals (SIGINT, SIGTERM) while a command works: they end it as interrupted (exit 130 or
143, as shells report them), never as an internal error."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import typer

from bundler.core.errors import STOP_SIGNALS, Terminated

if TYPE_CHECKING:
    from rich.console import Console


_stop_signals: list[int] = []
"""The stop signals (SIGINT, SIGTERM) the running command received. The exception a handler
raises can reach the command inside another: pydantic's serializer, interrupted while it calls
back into Python, reports a PydanticSerializationError. The command asks this list, not only
the exception's type, so an interrupted run never reads as an internal error."""


@contextmanager
def stop_signals_caught() -> Iterator[None]:
    """While the command works, a stop signal raises (KeyboardInterrupt, Terminated) and is
    noted for `exit_if_stopped`."""
    _stop_signals.clear()
    for number in STOP_SIGNALS:
        signal.signal(number, _on_stop_signal)
    try:
        yield
    finally:
        # The work is done and said: a stop signal from now on ends the process as such a
        # signal does (status 130 or 143), not as an exception raised while Python exits.
        for number in STOP_SIGNALS:
            signal.signal(number, signal.SIG_DFL)


def _on_stop_signal(signum: int, frame: object) -> None:
    _stop_signals.append(signum)
    raise KeyboardInterrupt if signum == signal.SIGINT else Terminated


def exit_if_stopped(console: Console, error: BaseException | None = None) -> None:
    """Exit as interrupted (130 for SIGINT, 143 for SIGTERM, as shells report them) when a stop
    signal came, whatever exception carries it, or when `error` is a stop raised without one.
    Called too when the command returned: a stop that came while Python ran a finalizer (a
    temporary file's `__del__`) raised there, and Python prints and drops an exception raised
    in a finalizer, so the command went on; it still ends as stopped."""
    if _stop_signals:
        signum = _stop_signals[-1]
    elif isinstance(error, (KeyboardInterrupt, Terminated)):
        signum = signal.SIGINT if isinstance(error, KeyboardInterrupt) else signal.SIGTERM
    else:
        return
    console.print("[red]interrupted[/]; nothing partial was left behind")
    raise typer.Exit(128 + signum)
