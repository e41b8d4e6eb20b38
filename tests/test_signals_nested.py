"""A signal hold within a hold (bundler.local.fileio.signals_held): the outer one's handlers
record what arrives and act on it when it ends, so a batch of commits is held at the cost of
one hold (bundler.local.durablebatch), and nothing is acted on in between."""

from __future__ import annotations

import signal

from bundler.local.fileio import signals_held


def test_a_signal_in_an_inner_hold_is_acted_on_when_the_outer_one_ends() -> None:
    seen: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda number, frame: seen.append(number))
    try:
        with signals_held():
            outer = signal.getsignal(signal.SIGTERM)
            with signals_held():
                assert signal.getsignal(signal.SIGTERM) is outer  # nothing installed again
                signal.raise_signal(signal.SIGTERM)
            assert seen == []  # the inner block's end acts on nothing
            signal.raise_signal(signal.SIGTERM)
            assert seen == []
        assert seen == [signal.SIGTERM]  # once, as for a signal held twice in one block
        with signals_held():  # and a later hold is a hold of its own again
            signal.raise_signal(signal.SIGTERM)
            assert seen == [signal.SIGTERM]
        assert seen == [signal.SIGTERM, signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, previous)
