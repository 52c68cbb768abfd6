"""Objects frozen out of the garbage collector while a run lasts, and the collector as it was after."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from ciq_optuna.study.heap import LongLived


class _Cycle:
    def __init__(self) -> None:
        self.me = self


@pytest.fixture(autouse=True)
def _nothing_frozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()
    gc.enable()


def test_settled_objects_are_out_of_reach_until_the_block_ends() -> None:
    cycle = _Cycle()
    alive = weakref.ref(cycle)
    with LongLived() as heap:
        assert gc.get_freeze_count() == 0  # nothing before settle
        heap.settle()
        frozen = gc.get_freeze_count()
        assert frozen > 0
        del cycle
        gc.collect()
        assert alive() is not None  # garbage, but frozen: no collection frees it
        late = _Cycle()
        late_alive = weakref.ref(late)
        heap.settle()
        # Once per block: the second settle freezes nothing new. (The count itself may drop: a
        # frozen object freed by its reference count, e.g. by another thread, leaves the frozen
        # generation.)
        assert gc.get_freeze_count() <= frozen
        del late
        gc.collect()
        assert late_alive() is None  # made after the first settle: still collected
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert alive() is None


def test_a_freeze_of_the_process_is_left_as_it_is() -> None:
    gc.freeze()
    before = gc.get_freeze_count()
    late = _Cycle()
    with LongLived() as heap:
        heap.settle()
        assert gc.get_freeze_count() == before
    assert gc.get_freeze_count() == before
    alive = weakref.ref(late)
    del late
    gc.collect()
    assert alive() is None  # made after the process's freeze: still collected


def test_nothing_is_frozen_while_the_collector_is_off() -> None:
    gc.disable()
    with LongLived() as heap:
        heap.settle()
        assert gc.get_freeze_count() == 0
    assert not gc.isenabled()

