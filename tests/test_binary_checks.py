"""Check rates of predicted repeats adapted to the study's own checks (``_checks.CheckRates``)."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from ciq_optuna.compilers.locate import find_compiler
from ciq_optuna.samplers import GeneticSampler, _genetic
from ciq_optuna.samplers._checks import DOUBTFUL, PLAIN, CheckRates
from ciq_optuna.tune import TuneConfig, tune

ROOT = Path(__file__).resolve().parents[1]
STENCIL = ROOT / "examples" / "stencil" / "stencil.sm_90a.ptx"
optuna.logging.set_verbosity(optuna.logging.WARNING)


def test_fixed_rates_ignore_the_checks() -> None:
    rates = CheckRates(0.1, 0.25)
    for _ in range(20):
        rates.record(PLAIN, wrong=False)
        rates.record(DOUBTFUL, wrong=True)
    assert not rates.adaptive
    assert rates.rate(0) == 0.1
    assert rates.rate(2) == pytest.approx(1 - 0.75**2)


def test_right_checks_lower_the_rate_and_a_wrong_one_raises_it() -> None:
    rates = CheckRates(0.1, 0.25, prior_wrong=1.0)
    assert rates.rate(0) == pytest.approx(0.1)  # no check yet: the fixed rates
    assert rates.rate(1) == pytest.approx(0.25)
    for _ in range(10):
        rates.record(PLAIN, wrong=False)
    assert rates.rate(0) == pytest.approx(1 / 20)
    assert rates.rate(1) == pytest.approx(0.25)  # kinds are counted apart
    rates.record(PLAIN, wrong=True)
    assert rates.rate(0) == pytest.approx(2 / 21)
    for _ in range(4):
        rates.record(PLAIN, wrong=True)
    assert rates.rate(0) > 0.1  # wrong checks are common here: more checks than the fixed rate
    rates.record(DOUBTFUL, wrong=False)
    assert rates.rate(1) == pytest.approx(1 / 5)
    assert rates.rate(2) == pytest.approx(1 - 0.8**2)  # the more doubt, the more checks
    assert rates.counts() == ((15, 5), (1, 0))


def _objective_with(binary):  # noqa: ANN001, ANN202
    """A toy compile objective: ``binary(params)`` is the binary; a skip takes the source's value."""

    def objective(trial: optuna.Trial) -> float:
        a = trial.suggest_int("a", 0, 7)
        b = trial.suggest_categorical("b", ["x", "y", "z"])
        c = trial.suggest_int("c", 0, 3)
        if trial.user_attrs.get("skip_compile"):
            source = trial.study.trials[trial.user_attrs["predicted_from"]]
            trial.set_user_attr("skipped_compile", True)
            return source.value
        trial.set_user_attr("binary_hash", binary(trial.params))
        return (a - 3) ** 2 + len(b) + 0.1 * c

    return objective


def _run(monkeypatch: pytest.MonkeyPatch, prior: float, binary, seed: int) -> tuple[optuna.Study, GeneticSampler]:  # noqa: ANN001
    monkeypatch.setattr(_genetic, "_CHECK_PRIOR_WRONG", prior)
    sampler = GeneticSampler(seed=seed, pool_size=8, binary_attr="binary_hash")
    study = optuna.create_study(sampler=sampler)
    study.optimize(_objective_with(binary), n_trials=80)
    return study, sampler


def _checks(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    return [t for t in study.trials if "predicted_binary" in t.user_attrs and "binary_hash" in t.user_attrs]


def test_the_sampler_counts_the_checks_the_trials_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """Gene c never changes the binary, b only when a >= 4: some predictions are wrong.  The
    sampler's counts are those of the compiled predicted trials, by the kind each records, and
    every skip records its prediction."""

    def binary(p: dict) -> str:
        return f"{p['a']}-{p['b'] if p['a'] >= 4 else '-'}"

    seen_wrong = 0
    for seed in range(1, 4):
        study, sampler = _run(monkeypatch, 1.0, binary, seed)
        checks = _checks(study)
        by_kind = [[0, 0], [0, 0]]
        for t in checks:
            kind = DOUBTFUL if t.user_attrs["predicted_doubt"] else PLAIN
            by_kind[kind][0] += 1
            by_kind[kind][1] += t.user_attrs["binary_hash"] != t.user_attrs["predicted_binary"]
        sampler._sync(study)
        assert [list(c) for c in sampler._checks.counts()] == by_kind
        seen_wrong += by_kind[PLAIN][1] + by_kind[DOUBTFUL][1]
        skipped = [t for t in study.trials if t.user_attrs.get("skipped_compile")]
        assert skipped and all({"predicted_from", "predicted_binary", "predicted_doubt"} <= set(t.user_attrs) for t in skipped)
        configs = [tuple(sorted(t.params.items())) for t in study.trials]
        assert len(configs) == len(set(configs))  # no configuration proposed twice
    assert seen_wrong > 0  # the study above can fail a check: the counts are not trivially zero


def test_reliable_predictions_are_checked_less(monkeypatch: pytest.MonkeyPatch) -> None:
    """Gene c never changes the binary and every prediction is right: with the rates adapted,
    fewer predicted trials are compiled as checks than with the fixed rates (summed over seeds)."""

    def binary(p: dict) -> str:
        return f"{p['a']}-{p['b']}"

    share = {}
    for prior in (0.0, 1.0):
        checks = predicted = 0
        for seed in range(1, 7):
            study, sampler = _run(monkeypatch, prior, binary, seed)
            got = _checks(study)
            assert all(t.user_attrs["binary_hash"] == t.user_attrs["predicted_binary"] for t in got)
            checks += len(got)
            predicted += sum("predicted_binary" in t.user_attrs and "repeat_of" not in t.user_attrs for t in study.trials)
            if prior:
                assert sampler._checks.base(PLAIN) <= 0.1 and sampler._checks.base(DOUBTFUL) <= 0.25
            else:
                assert not any("predicted_doubt" in t.user_attrs for t in study.trials)  # knob off: as before
        share[prior] = checks / predicted
    assert share[1.0] < share[0.0]


try:
    find_compiler("ptxas")
    HAVE_PTXAS = True
except Exception:  # noqa: BLE001
    HAVE_PTXAS = False


@pytest.mark.skipif(not HAVE_PTXAS, reason="no ptxas installed")
def test_tune_with_adapted_rates_records_every_skip_and_compiles_required_trials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_genetic, "_CHECK_PRIOR_WRONG", 1.0)
    result = tune(
        TuneConfig(
            kernel=STENCIL,
            arch="sm_90a",
            minimize=["registers"],
            trials=48,
            seed=0,
            storage=f"sqlite:///{tmp_path}/s.db",
            acf=tmp_path / "best.acf",
            workdir=tmp_path / "work",
            progress=False,
        )
    )
    trials = result.study.get_trials(deepcopy=False)
    skipped = [t for t in trials if t.user_attrs.get("skipped_compile")]
    assert skipped
    assert all("predicted_from" in t.user_attrs for t in skipped)
    required = [t for t in trials if t.user_attrs.get("compile_required")]
    assert required and all("binary_hash" in t.user_attrs or t.state.name == "FAIL" for t in required)
    assert not any(t.user_attrs.get("skipped_compile") for t in required)
