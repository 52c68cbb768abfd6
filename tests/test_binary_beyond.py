"""Binary-aware search: an ordered gene whose changes were all inert is inert beyond the interval
of values seen inert (``BinaryModel.beyond_doubt``), with doubt; unordered genes are not."""

from __future__ import annotations

import numpy as np

from ciq_optuna.samplers import GeneticSampler, _genetic
from ciq_optuna.samplers._binaries import BinaryModel


def _model(beyond_doubt: int) -> BinaryModel:
    m = BinaryModel()
    m.beyond_doubt = beyond_doubt
    m.set_ordered([False, True])  # gene 0: a choice, gene 1: an ordered level
    m.add(np.array([0.0, 2.0]), "A", 0)
    m.add(np.array([0.0, 3.0]), "A", 1)  # gene 1: 2 -> 3 inert
    m.add(np.array([1.0, 2.0]), "B", 2)  # gene 0: 0 -> 1 mattered
    return m


def test_an_ordered_gene_is_inert_beyond_the_interval_seen_with_doubt() -> None:
    got = _model(1).predict(np.array([[0.0, 5.0], [0.0, 0.0], [0.0, 3.0], [1.0, 6.0]]))
    assert [p[:2] if p else None for p in got] == [("A", 0), ("A", 0), ("A", 0), ("B", 2)]
    assert got[0][2] >= 1 and got[1][2] >= 1  # values never seen inert: doubt
    assert got[2][2] == 0  # the pair seen inert: none
    assert _model(3).predict(np.array([[0.0, 5.0]]))[0][2] >= 3


def test_off_only_the_interval_seen_inert_is_predicted() -> None:
    got = _model(0).predict(np.array([[0.0, 5.0], [0.0, 3.0]]))
    assert got[0] is None and got[1][:2] == ("A", 0)


def test_neither_absence_nor_unordered_genes_nor_genes_that_mattered_are_stretched() -> None:
    m = _model(1)
    m.add(np.array([2.0, 2.0]), "C", 3)
    m.add(np.array([3.0, 2.0]), "C", 4)  # gene 0 (unordered): 2 -> 3 inert, but 0 -> 1 mattered
    assert m.predict(np.array([[0.0, -1.0], [4.0, 2.0]])) == [None, None]
    m.add(np.array([0.0, 7.0]), "D", 5)  # gene 1: 2 -> 7 mattered
    assert m.predict(np.array([[0.0, 5.0]])) == [None]


def test_an_inert_change_from_absence_alone_is_not_stretched() -> None:
    m = BinaryModel()
    m.beyond_doubt = 1
    m.set_ordered([False, True])
    m.add(np.array([0.0, np.nan]), "A", 0)
    m.add(np.array([0.0, 3.0]), "A", 1)  # gene 1 absent -> 3 inert (3: the default), no change between values
    assert m.predict(np.array([[0.0, 5.0]])) == [None]
    m.add(np.array([0.0, 4.0]), "A", 2)  # 3 -> 4 inert
    assert m.predict(np.array([[0.0, 5.0]]))[0][:2] == ("A", 1)


def test_a_failed_check_ends_the_stretch() -> None:
    m = _model(1)
    m.wrong_prediction(np.array([0.0, 6.0]), 0)
    m.add(np.array([0.0, 6.0]), "E", 3, predicted_from=0)
    assert m.predict(np.array([[0.0, 5.0]])) == [None]
    assert m.predict(np.array([[0.0, 3.0]]))[0][:2] == ("A", 0)


def test_the_sampler_knob_sets_the_model(monkeypatch) -> None:
    monkeypatch.setattr(_genetic, "_ORDERED_BEYOND", 2)
    assert GeneticSampler(seed=0)._binaries.beyond_doubt == 2
    monkeypatch.setattr(_genetic, "_ORDERED_BEYOND", 0)
    assert GeneticSampler(seed=0)._binaries.beyond_doubt == 0
