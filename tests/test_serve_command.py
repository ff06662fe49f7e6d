"""What ``serve`` does around building the service (extender/serve_command.py)."""

from __future__ import annotations

import gc

import pytest

from extender.serve_command import paused_collector


class _Boom(Exception):
    pass


def test_the_collector_is_paused_while_the_state_loads_and_what_loaded_is_frozen() -> None:
    frozen = gc.get_freeze_count()
    try:
        with paused_collector():
            assert not gc.isenabled()
            loaded = [[i] for i in range(1000)]  # container objects the collector tracks
        assert gc.isenabled()
        assert gc.get_freeze_count() >= frozen + len(loaded)
    finally:
        gc.unfreeze()  # the test process's collector as it was


def test_a_failed_load_leaves_the_collector_running_and_freezes_nothing() -> None:
    frozen = gc.get_freeze_count()
    with pytest.raises(_Boom), paused_collector():
        raise _Boom
    assert gc.isenabled()
    assert gc.get_freeze_count() == frozen
