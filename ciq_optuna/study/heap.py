"""Full garbage collections kept off what a run reads once and keeps: the study's trials, the
sampler's model of them.

CPython's full collection visits every object the collector tracks. A tune on a study of 5,000
trials holds a few hundred thousand of them (the storage's copy of each trial, the sampler's rows
and indexes) from its first trial to its end, so a full collection costs 0.1-0.2 s there, against
a few ms for the work of one trial; in a process that keeps such objects (several tunes, a
benchmark) one falls in about every 25 trials. ``LongLived`` freezes them (``gc.freeze``) once the study is
read: later collections, full ones included, visit only what was made after. They return to the
collector when the run ends (``gc.unfreeze``), so a process that runs several tunes frees their
garbage as before.
"""

from __future__ import annotations

import gc
import threading
from types import TracebackType


class LongLived:
    """``with LongLived() as heap:`` ... ``heap.settle()`` once the study is read (e.g. after the
    first trial): every object alive then is out of the collector's reach until the block ends.

    Does nothing when the collector is disabled or objects are frozen already on entry (the
    process's own ``gc.freeze``, left as it is). ``settle`` freezes once per block; it is safe from
    several threads.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._allowed = False
        self._frozen = False

    def __enter__(self) -> LongLived:
        self._allowed = gc.isenabled() and gc.get_freeze_count() == 0
        return self

    def settle(self) -> None:
        """Freeze every object alive now, the first time in this block."""
        if self._frozen or not self._allowed:
            return
        with self._lock:
            if not self._frozen:
                gc.freeze()
                self._frozen = True

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        with self._lock:
            if self._frozen:
                gc.unfreeze()
            self._frozen = False
            self._allowed = False
