"""GeneticSampler: an elitist genetic sampler for discrete, failure-prone tuning spaces."""

from __future__ import annotations

import bisect
import functools
import itertools
import json
import logging
import math
import struct
import threading
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from optuna.distributions import BaseDistribution
from optuna.exceptions import TrialPruned
from optuna.samplers import BaseGASampler, RandomSampler
from optuna.storages import InMemoryStorage
from optuna.study import Study, StudyDirection
from optuna.trial import FrozenTrial, TrialState

from ciq_optuna.samplers._binaries import BinaryModel
from ciq_optuna.samplers._breed import breed
from ciq_optuna.samplers._distance import RowDistances, table_codes
from ciq_optuna.samplers._genes import Gene, draws_random, neighbours
from ciq_optuna.samplers._mutation import mutate
from ciq_optuna.samplers._optuna import (
    cached_trials,
    contains,
    non_domination_rank,
    storage_of,
    study_id_of,
    trial_id_of,
)
from ciq_optuna.samplers._repair import pair_move_keys, repairs
from ciq_optuna.samplers._start import QMCStart, SobolStart, breeds_early
from ciq_optuna.samplers._surrogate import ValueCounts

_LOG = logging.getLogger("ciq_optuna.samplers")

CROSSOVERS = ("uniform", "onepoint", "twopoint", "none")
_KEY_ATTR = "GeneticSampler:key"
#: The trial system attribute holding the configuration a trial claims (read by other workers).
CLAIM_ATTR = _KEY_ATTR
_POOL_ATTR = "GeneticSampler:pool_size"
_N_CANDIDATES = 64
_CLAIM_TRIES = 8
_COMPLETE_DRAWS = 64  # draws of a plan's open genes (see GeneticSampler._completed)
_MIN_FRESH = 6
_NICHE_RADIUS = 1.0
_SURROGATE_WINDOW = 256  # default _window: rows the pick compares with (x4: distance table, explorers)
_ENUMERATE_LIMIT = 200_000
# Stagnation (see GeneticSampler.stagnation): a restart after this many whole generations
# without improvement, then a new restart every _EPOCH_GENS generations while none comes.
_STALL_GENS = 3
_EPOCH_GENS = 4
_EPOCH_GLOBAL = 0.75  # share of a restart epoch's children still bred from the global elite
_EXPLORE_CANDIDATES = 256
_EXPLORE_SHARE = 0.25  # share of a restart's first generation that explores
# Surrogate that picks the child to run: "knn" (fitness of the nearest evaluated trials),
# "tpe" (per-gene value statistics of the best _GAMMA of trials against the others) or "mix"
# (the _KNN_TOP best candidates by value statistics, then the nearest-neighbour score).
_SURROGATE = "mix"
_GAMMA = 0.15
_KNN_TOP = 4
_FAIL_WEIGHT = 0.0  # weight of the failure risk in the value-statistics score of "mix"
_PAIR_WEIGHT = 0.0  # weight of the gene-pair interactions in the value statistics (_pairs.py; 0: off)
_PAIR_FAIL = False  # failure risk also from the failure rates of gene-value pairs (_pairs.py)
_PAIR_FAIL_GENS = 0  # with _PAIR_FAIL: only while fewer trials than this many generations finished (0: always)
_MIX_GENS = 8  # "mix" while fewer trials than this many generations finished, then "knn"
_KNN_CANDS = 16  # children compared by "knn" alone (its distances cost the most per candidate)
_CHILD_BATCH = 512  # children bred at once per elite (drawn from by later trials while it holds)
# Random numbers of the children: "pcg", a numpy Generator drawing only what is used (_breed.py);
# "legacy", the RandomState's whole (children x genes) blocks (the proposals before, 4x slower).
_DRAWS = "pcg"
# Gene distances summed in numpy's pairwise order (True: the proposals before) or gene by gene
# (False: one reduction instead of the pairwise order worked out in Python; ties may break otherwise).
_PAIRWISE_SUMS = False
# Nearest neighbours at equal distances: True, the earliest trials (three argmin passes, the same
# on every machine); False, as numpy's argpartition leaves them (its order depends on the CPU's
# vector instructions; slower on distances with many ties).
_FIRST_TIES = True
# Local search (see GeneticSampler._local): share of the trials that try an unseen one-gene
# neighbour of the best trials, before and after _LS_GENS whole generations without improvement;
# neighbours likelier to fail than _LS_RISK (or than the trial they come from) are left out.
_LS_SHARE = 0.0
_LS_STALL = 0.5
_LS_GENS = 1
_LS_RISK = 0.95
_LS_DEPTH = 2  # 2: when a trial's one-gene neighbourhood is done, its two-gene one follows
_LS_SURVIVORS = 1_000  # survivors whose neighbourhoods are walked (best first)
# While a restart is running (stagnation): 1 local search as at other times, 0 none, 2 only
# in the trials that breed from the study's elite (not the explorers or the restart's elite)
_LS_RESTART = 2
# With _LS_RESTART: local search during a restart only while fewer than this share of the trials
# numbered since the last improvement failed (1: no limit); a failure-prone optimum's
# neighbourhood is then left to the restart.
_LS_RESTART_FAIL = 0.3
# With _LS_RESTART: the share of the trials that take local search while a restart runs (_LS_STALL
# is the share once stalled outside a restart); a smaller one runs fewer of the costlier trials.
_LS_RESTART_SHARE = 0.5
# A neighbourhood that draws random values (a wide ordered gene) is kept for this many finished
# trials before it is drawn again (0: drawn anew at every local-search trial).  Local search
# walks the same best trial many times; drawing its two-gene neighbourhood (hundreds of rows)
# every time was the largest part of a local-search trial on such spaces.
_LS_KEEP_DRAWN = 64
_LS_KEEP = 32  # neighbours that the value statistics pass on to the nearest-neighbour pick
# Local search, two-gene moves (0: off): the _LS_PAIRS pairs of the best one-gene moves are passed
# to the pick, a pair scored by the ranks of its two one-gene moves among the trial's evaluated
# one-gene neighbours (a failed or unseen move ranks _LS_PAIR_UNKNOWN); this order replaces the
# value statistics (_LS_KEEP) there, after the repairs first (_LS_REPAIR).
_LS_PAIRS = 4
_LS_PAIR_UNKNOWN = 0.5
# Generation 0: from this many finished trials on, the value statistics pick among random
# candidates (0: every trial of generation 0 is random); _G0_FILL: prefer seldom-tried values.
_G0_GUIDE = 0
_G0_FILL = False
# Generation 0, once a trial failed: the least failure-prone of this many random candidates (0: off).
_G0_SAFE = 0
# Generation 0 as a scrambled Sobol design (_start.py); from slot _G0_BREED * pool_size of
# generation 0 on, children of the complete trials (0: generation 0 is all design/random).
_G0_SOBOL = False
_G0_BREED = 0.0
# Generation 0 after trial 0, up to slot _G0_QMC * pool_size (0: none, 1: all of it), as Optuna's
# default QMCSampler samples it (_start.py QMCStart: the unscrambled Sobol points in order, a point
# already in the study or running skipped, so enqueued trials take no point); later slots: random.
# 0.65 adopted on replayed GPU tuning spaces (BENCHMARKS.md); all of it (1.0) left no diversity.
_G0_QMC = 0.65
_QMC_ROWS = 64  # design points looked at past trial number - 1 (the first not in the study is run)
# Generation 0 from slot _G0_BREED * pool_size on: only every _G0_EVERY-th slot breeds, the others
# stay random (coverage kept); _G0_SPREAD: a bred slot runs the child farthest from every
# evaluated trial, failure risk weighed in (the restarts' explorer pick), not the most promising.
_G0_EVERY = 1
_G0_SPREAD = False
# Local search: two-gene moves holding a one-gene move that failed are taken first (_repair.py);
# 2: only those whose other one-gene move is complete.
_LS_REPAIR = 1
# Local search, sooner (0: off): stalled once more than _LS_WINDOW * pool_size trials were numbered
# since the last improvement (not only after _LS_GENS whole generations); once a share _LS_TWO of a
# trial's one-gene neighbourhood has been evaluated, half of the local-search trials (by trial
# number) take its two-gene moves first.
_LS_WINDOW = 0.0
_LS_TWO = 0.5
# Binary-aware search: share of predicted repeats compiled anyway, so a wrong prediction is caught.
_CHECK_RATE = 0.1
# ... and of those that stretch an inertness to a context not seen yet (BinaryModel.predict).
_UNTESTED_CHECK_RATE = 0.25
# User attribute of a queued trial that compiles whatever is predicted: no prediction is announced.
_COMPILE_REQUIRED = "compile_required"
# Binary-aware: queued trials (enqueue_trial: fixed values) are predicted too, so an objective may
# skip their compile (not those marked compile_required): adopted on held-out tunes (the winner's
# simplification attempts, BENCHMARKS.md).  Trials that skipped their compile teach which genes
# the objective asks for: off (measured with the generalisation from one inert change, not adopted).
_PREDICT_FIXED = True
_LEARN_SHAPES = False
# Binary-aware: a plan whose open genes were drawn before its claim (_completed) is predicted as
# completed, not as planned (the prediction of the plan stood for a configuration without them).
# These three (E) and _FEWER_CHECKS: adopted together on held-out tunes (BENCHMARKS.md, branch s24k).
_PREDICT_COMPLETED = True
# Binary-aware: a configuration that still leaves open a gene the objective will ask for is
# predicted only when every value the objective may draw for it falls in one class there.
_OPEN_ONE_CLASS = True
# Binary-aware: a gene inert as a whole is so only at the values seen in inert changes (BinaryModel.whole_seen).
_WHOLE_SEEN = True
# Binary-aware: check rates of predictions by doubt (BinaryModel.predict), for the doubts listed
# (index = doubt; (0.02, 0.1): plain predictions checked at 2 %, those with doubt 1 at 10 %);
# larger doubts, and every doubt when empty, keep _CHECK_RATE / _UNTESTED_CHECK_RATE.
_FEWER_CHECKS: tuple[float, ...] = (0.02, 0.1)
# Binary-aware: an ordered gene whose changes were all inert is inert at values beyond the interval
# seen inert too, such predictions with at least this doubt (BinaryModel.beyond_doubt; 0: off:
# measured, no right skips over the defaults and more wrong ones, BENCHMARKS.md branch s24k).
_ORDERED_BEYOND = 0


def default_pool_size(sizes: Iterable[float]) -> int:
    """The pool size for genes of these numbers of values (a float gene counts as 1024):
    ``clip(round(1.5 * bits), 8, 40)``, ``bits`` = log2 of the number of distinct configurations."""
    bits = sum(math.log2(min(n, 1024.0)) for n in sizes if n > 1)
    return int(min(40, max(8, round(1.5 * bits))))


def _generator(seed: int | None) -> np.random.Generator:
    """The Generator of the children's random numbers (``_DRAWS == "pcg"``), from the sampler's
    seed but a stream of its own (the RandomState keeps ``seed`` itself)."""
    return np.random.default_rng(None if seed is None else [seed, 0x6272])


class _Exhausted:
    """Marker plan: no unseen configuration is left."""

    def __init__(self, message: str) -> None:
        self.message = message


class GeneticSampler(BaseGASampler):
    """Elitist (mu + lambda) genetic sampler with storage-side generation bookkeeping.

    How it searches: generation 0 holds ``pool_size`` trials, never repeated, enqueued trials
    included.  Trial 0 is random; trials 1 up to about two thirds of the pool (``design_start``)
    take the points of Optuna's default ``QMCSampler`` (the unscrambled Sobol sequence, the same
    for every seed, mapped to values as that sampler does: the lowest value of every parameter,
    then the middle, the quarters, ...), each the first point not yet in the study or running; the
    rest of generation 0 is random, so seeds differ.  In compiler studies generation 0 is all
    random by default (see ``design_start``).  Each later trial is a child of the survivors: the ``survivors`` best
    finished trials, each at least one gene-unit away from every better survivor (niching: one
    local optimum cannot fill the whole elite).  Two parents are chosen by binary tournament,
    crossed over (kind ``crossover``, probability ``crossover_prob``), then each gene mutates with
    probability ``mutate_rate`` (at least one gene changes).  Up to 64 unseen children are taken
    (bred 512 at a time per elite and handed out while the elite holds; mutation grows stronger
    while fewer than six are unseen) and the one to run is picked by cheap models of the evaluated
    trials.  In the first generations (``_MIX_GENS``) the four children whose gene values are most
    typical of the best 15 % of the trials (per-gene value statistics against the other trials,
    failures among them: a TPE-like density ratio, see ``_surrogate.py``) are kept; then, and
    among all children later, the one whose three nearest evaluated neighbours rank best
    (failures rank worst) plus the highest failure rate among its gene values wins, so regions and
    values that fail are learnt and avoided.  Parents come from all trials finished when the child
    is made (steady state), so parallel workers never wait for a generation to finish.

    Gene operators per distribution: integers, stepped floats and categoricals whose choices are
    all numbers are ordered (neighbours are likelier than far values, one mutation in ten is a
    uniform re-draw); other categoricals re-draw another choice (a two-state on/off or "not
    passed" gene toggles); floats and log integers move by a Gaussian in their (log) transformed
    range.  Conditional parameters (suggested in some trials only) are genes that may be absent;
    the sampler learns which earlier parameter value switches each one on, so configurations are
    compared on the parameters that are actually used.

    Duplicates: a configuration already in the study (finished, running in any worker, or waiting
    in the queue) is never proposed.  Each trial's planned configuration is stored in the trial
    (system attribute ``GeneticSampler:key``); with a shared storage the worker reads all claims
    again after writing its own and plans again on a clash, so workers in other processes that plan
    at the same moment cannot pick the same one.  A gene that the plan switches on but leaves out
    (a child with ``x.passed`` True of a parent without ``x``) is drawn before the claim, again
    while that makes a configuration already in the study, so the claim is what the objective
    runs.  Trials started before any trial with parameters
    exists (the very first ones) are drawn at random.  When no unseen configuration is left, the
    sampler logs a warning, calls ``study.stop()`` (inside ``study.optimize``) and raises
    ``optuna.TrialPruned`` from the first ``suggest_*`` call of the trial, so ``study.optimize``
    ends cleanly with that trial PRUNED and nothing evaluated twice.

    Generations: trial number ``n`` belongs to generation ``n // pool_size`` (trial numbers are
    assigned by the storage, so N workers on one study behave like one and every generation holds
    exactly ``pool_size`` trials).  Trials enqueued before the search starts take the first numbers
    and so join generation 0.  The generation is written to the trial's user attribute
    ``generation``.  Failed trials (FAIL, NaN values) rank below every complete trial.

    Defaults, from the size of the search space seen in the first finished trial (``bits`` =
    log2 of the number of distinct configurations, floats counted as 1024 values):
    ``pool_size = clip(round(1.5 * bits), 8, 40)``, ``survivors = max(2, pool_size // 3)``,
    ``mutate_rate = 1 / number of genes with more than one value``.  The first resolved pool size is stored in the study so
    every worker uses the same one.

    Local search: once a whole generation brought no improvement, every second trial is an
    unseen neighbour of the best trial: first those one gene away, then those two genes away
    (genes that only work when changed together; once half of the one-gene neighbourhood is
    evaluated, half of the local-search trials, by trial number, take the two-gene moves
    already, so a trap two genes from a better basin is left sooner): first the pairs that hold
    a one-gene move that failed (the failing change with one that may repair it, see
    ``_repair.py``), of those the 4 whose two one-gene moves ranked best among the evaluated
    one-gene neighbours (of one-gene moves, the 32 most typical of the best trials by the value
    statistics), compared by the nearest-neighbour pick; neighbours likelier to fail
    than 0.95 (and than the best trial) are left out.  When the best trial's neighbourhood is
    done, the next survivor's follows (a neighbourhood with random re-draws of a wide ordered
    gene is kept for 64 finished trials).  During a restart the trials bred from the study's elite
    go on with local search, unless 30 % of the trials since the last improvement failed (a
    failure-prone optimum's neighbourhood is left to the restart).  On small discrete spaces the
    random children can miss a better neighbour of the best trial for hundreds of trials.

    Stagnation: when no trial of three whole generations improved on the trials numbered before
    it, the next generation restarts (a quarter of it explores the region farthest from every
    evaluated trial, failure-prone values avoided; in later generations a quarter of the children
    breed from the restart's own elite, the rest from the study's elite, which is kept), and a new
    restart follows every four generations until something improves.  It is derived from the trial numbers and values in
    storage, so every worker agrees; see :meth:`stagnation`.

    Binary-aware search (compiler studies): when trials carry the user attribute ``binary_attr``
    (``binary_hash``, filled by ciq-optuna's compile objective), the sampler learns which gene
    value changes left the binary unchanged (pairs of compiled trials that differ in a few genes
    and gave the same binary; a one-gene difference that changed the binary splits that change
    off), and which genes are inert as a whole, in which context (see
    :class:`~ciq_optuna.samplers._binaries.BinaryModel`).  When the configuration it proposes can
    only give a binary already compiled, it sets the trial's user attributes ``predicted_binary``,
    ``predicted_from`` (the number of a trial that compiled it) and ``skip_compile`` (True, except
    for one prediction in ten, and one in four of those that stretch an inertness to a context not
    seen yet, more after failed checks that blamed the genes it changes: these are compiled as
    checks; a check that gives another binary splits the changes involved).  Candidates are also
    compared as the compile objective will see them (genes that conditions learnt from the
    compiled trials leave unused dropped), so a plan that only differs in unused genes is not
    proposed again.  Queued trials (``enqueue_trial``) are predicted the same way, except those
    queued with the user attribute ``compile_required``.
    An objective that honours ``skip_compile`` returns trial ``predicted_from``'s values without
    compiling and sets ``skipped_compile`` (such trials are not used as evidence).  Studies
    without the attribute behave exactly as before.

    Multi-objective studies are ranked by non-dominated sorting then crowding distance
    (NSGA-II's order); :func:`ciq_optuna.samplers.make_sampler` returns this sampler for any number
    of objectives (the multi-objective replay in BENCHMARKS.md compares it with NSGA-II).

    Args:
        pool_size: candidates per generation (population size).
        survivors: number of best trials kept as parents.
        mutate_rate: per-gene mutation probability.
        crossover: ``"uniform"``, ``"onepoint"``, ``"twopoint"`` or ``"none"`` (mutation only).
        crossover_prob: probability that a child is a crossover of two parents.
        seed: random seed.
        binary_attr: trial user attribute holding the code hash of the trial's binary (None:
            never predict binaries).
        design_start: share of generation 0 taken from Optuna's default QMC design (0: all of
            it random).  None: 0.65, except in compiler studies (once a finished trial carries
            ``binary_attr``), where generation 0 stays random: there the design measured no
            better on the compile-skips benchmark and worse on short tunes of the stencil
            example (BENCHMARKS.md), and ``ciq-optuna tune`` starts from the compiler's defaults
            and one-control changes of them.
    """

    def __init__(
        self,
        *,
        pool_size: int | None = None,
        survivors: int | None = None,
        mutate_rate: float | None = None,
        crossover: str = "uniform",
        crossover_prob: float = 0.5,
        seed: int | None = None,
        binary_attr: str | None = "binary_hash",
        design_start: float | None = None,
    ) -> None:
        if pool_size is not None and pool_size < 2:
            raise ValueError("pool_size must be at least 2")
        if survivors is not None and survivors < 1:
            raise ValueError("survivors must be at least 1")
        if mutate_rate is not None and not 0.0 < mutate_rate <= 1.0:
            raise ValueError("mutate_rate must be in (0, 1]")
        if crossover not in CROSSOVERS:
            raise ValueError(f"crossover must be one of {', '.join(CROSSOVERS)}, not {crossover!r}")
        if not 0.0 <= crossover_prob <= 1.0:
            raise ValueError("crossover_prob must be in [0, 1]")
        if design_start is not None and not 0.0 <= design_start <= 1.0:
            raise ValueError("design_start must be in [0, 1]")
        super().__init__(population_size=pool_size)
        self._pool_arg = pool_size
        self._survivors_arg = survivors
        self._mutate_arg = mutate_rate
        self._crossover = crossover
        self._crossover_prob = crossover_prob
        self._seed = seed
        self._rng = np.random.RandomState(seed)
        self._gen = _generator(seed)
        self._random = RandomSampler(seed=None if seed is None else seed + 1)
        self._n_candidates = _N_CANDIDATES
        self._niche = _NICHE_RADIUS
        self._stall_gens = _STALL_GENS
        self._epoch_gens = _EPOCH_GENS
        self._epoch_global = _EPOCH_GLOBAL
        self._explore_share = _EXPLORE_SHARE
        self._surrogate = _SURROGATE
        self._gamma = _GAMMA
        self._knn_top = _KNN_TOP
        self._fail_weight = _FAIL_WEIGHT
        self._pair_weight = _PAIR_WEIGHT
        self._pair_fail = _PAIR_FAIL
        self._pair_fail_gens = _PAIR_FAIL_GENS
        self._mix_gens = _MIX_GENS
        self._knn_cands = _KNN_CANDS
        self._child_batch = _CHILD_BATCH
        self._draws = _DRAWS
        self._pairwise_sums = _PAIRWISE_SUMS
        self._window = _SURROGATE_WINDOW
        self._first_ties = _FIRST_TIES
        self._ls_share = _LS_SHARE
        self._ls_stall = _LS_STALL
        self._ls_gens = _LS_GENS
        self._ls_risk = _LS_RISK
        self._ls_depth = _LS_DEPTH
        self._ls_survivors = _LS_SURVIVORS
        self._ls_restart = _LS_RESTART
        self._ls_restart_fail = _LS_RESTART_FAIL
        self._ls_restart_share = _LS_RESTART_SHARE
        self._ls_keep_drawn = _LS_KEEP_DRAWN
        self._ls_keep = _LS_KEEP
        self._ls_pairs = _LS_PAIRS
        self._ls_pair_unknown = _LS_PAIR_UNKNOWN
        self._g0_guide = _G0_GUIDE
        self._g0_fill = _G0_FILL
        self._g0_safe = _G0_SAFE
        self._g0_sobol = _G0_SOBOL
        self._g0_breed = _G0_BREED
        self._g0_qmc = _G0_QMC if design_start is None else design_start
        self._design_auto = design_start is None
        self._g0_every = _G0_EVERY
        self._g0_spread = _G0_SPREAD
        self._ls_repair = _LS_REPAIR
        self._ls_window = _LS_WINDOW
        self._ls_two = _LS_TWO
        self._sobol = SobolStart(seed)
        self._qmc = QMCStart()
        self._child_batches: dict[tuple, list] = {}
        self._counts: ValueCounts | None = None
        self._binary_attr = binary_attr
        self._check_rate = _CHECK_RATE
        self._untested_check_rate = _UNTESTED_CHECK_RATE
        self._fewer_checks = tuple(float(r) for r in _FEWER_CHECKS)
        self._avoid_repeats = False  # True: prefer children not predicted to repeat a binary
        # local search: True drops moves predicted to repeat a binary while an unpredicted one
        # exists; False (adopted on held-out tunes, BENCHMARKS.md) keeps them for the pick
        self._ls_avoid_repeats = False
        self._predict_fixed = _PREDICT_FIXED
        self._learn_shapes = _LEARN_SHAPES
        self._lock = threading.RLock()
        self._plans: dict[int, dict[str, Any] | _Exhausted] = {}
        self._reset(None)

    # ------------------------------------------------------------------ public knobs

    @property
    def pool_size(self) -> int | None:
        """Candidates per generation (None until resolved from the first finished trial)."""
        return self.population_size

    def reseed_rng(self) -> None:
        self._rng = np.random.RandomState()
        self._gen = _generator(None)
        self._random.reseed_rng()

    # ------------------------------------------------------------------ study cache

    def _reset(self, study_id: int | None) -> None:
        self._study_id = study_id
        self._genes: dict[str, Gene] = {}
        self._names: list[str] = []
        self._index: dict[str, int] = {}
        self._seen_upto = 0
        self._pending: list[int] = []
        self._x = np.full((256, 16), math.nan)
        self._v = np.full((256, 1), math.nan)
        self._num = np.full(256, -1, dtype=np.int64)
        self._n = 0
        self._improve_cache: tuple[int, int] = (-1, -1)
        self._improve_state: tuple[int, int, float, int] | None = None  # rows, last, best, top number
        self._sorted: tuple[int, np.ndarray, list[float]] = (0, np.empty(0, dtype=np.int64), [])  # rows, order, values
        self._badness_cache: tuple[np.ndarray | None, np.ndarray] = (None, np.empty(0))
        self._binaries = BinaryModel()
        self._predict_completed = _PREDICT_COMPLETED
        self._open_one_class = _OPEN_ONE_CLASS
        self._binaries.whole_seen = _WHOLE_SEEN
        self._binaries.beyond_doubt = _ORDERED_BEYOND
        self._keys: set[bytes] = set()
        self._keys_d = 0
        self._rules: list[tuple[int, int, np.ndarray]] = []
        self._rules_n = -1
        self._activation: _Activation | None = None
        self._first_absent = math.inf  # the first gene some row lacks (a row lacks the genes after its own)
        self._order_cache: tuple[int, np.ndarray] = (-1, np.empty(0, dtype=int))
        self._tables_d = -1
        self._elite_cache: tuple[tuple, np.ndarray] = ((), np.empty(0, dtype=int))
        self._elite_quick: tuple[tuple, tuple | None] = ((), None)  # (genes, top rows' bytes), the cache they gave
        self._fail_tab: dict[int, np.ndarray] = {}
        self._n_failed = 0
        self._fail_stack: tuple = (-1, None, None)
        self._fail_rates: tuple = (None, None, None, None)
        self._fail_counts: ValueCounts | None = None
        self._counted: tuple[int, list[int]] = (-1, [])
        self._integral_d: tuple[int, bool] = (-1, False)
        self._neighbourhoods: dict[tuple, _Neighbourhood] = {}
        self._pairs: tuple[int, np.ndarray, np.ndarray | None] = (-1, np.empty(0, dtype=np.int64), None)
        self._row_distances = RowDistances(4 * self._window)
        self._failed_cache: tuple[int, int, set[bytes]] = (0, -1, set())  # rows, genes, keys
        self._key_rows: tuple[int, int, dict[bytes, int]] = (0, -1, {})  # rows, genes, row of each key

    def _gene_for(self, name: str, dist: BaseDistribution) -> None:
        if name in self._genes:
            return
        self._genes[name] = Gene(name, dist)
        self._index[name] = len(self._names)
        self._names.append(name)
        if len(self._names) > self._x.shape[1]:
            grown = np.full((self._x.shape[0], 2 * self._x.shape[1]), math.nan)
            grown[:, : self._x.shape[1]] = self._x
            self._x = grown

    def _encode(self, params: dict[str, Any]) -> np.ndarray:
        return np.array(self._encode_list(params))

    def _encode_list(self, params: dict[str, Any]) -> list[float]:
        """The genome of ``params`` as a list (NaN: absent)."""
        row = [math.nan] * len(self._names)
        index, genes = self._index, self._genes
        for name, value in params.items():
            j = index.get(name)
            if j is not None:
                row[j] = genes[name].encode(value)
        return row

    def _add_row(self, params: dict[str, Any], values: Sequence[float], number: int) -> None:
        if self._n == self._x.shape[0]:
            grown = np.full((2 * self._x.shape[0], self._x.shape[1]), math.nan)
            grown[: self._n] = self._x
            self._x = grown
            self._num = np.concatenate([self._num, np.full(self._n, -1, dtype=np.int64)])
            grown_v = np.full((2 * self._v.shape[0], self._v.shape[1]), math.nan)
            grown_v[: self._n] = self._v
            self._v = grown_v
        if len(values) != self._v.shape[1]:
            self._v = np.full((self._x.shape[0], len(values)), math.nan)
        codes = self._encode_list(params)
        d = len(codes)
        self._x[self._n, :d] = codes
        self._first_absent = min(self._first_absent, next((j for j, c in enumerate(codes) if c != c), d))
        self._v[self._n] = values
        self._num[self._n] = number
        self._n += 1
        failed = math.isnan(values[0])
        self._n_failed += failed
        for j in self._counted_genes(d):
            code = codes[j]
            if code != code:  # NaN: the gene is absent
                continue
            tab = self._fail_tab.get(j)
            if tab is None:
                tab = self._fail_tab[j] = np.zeros((2, self._genes[self._names[j]].n))
            if failed:
                tab[0, int(code)] += 1
            tab[1, int(code)] += 1
        if self._keys_d == d:
            self._keys.add(_key(codes) if self._integral(d) else _keys(np.array([codes]))[0])
        if self._activation is not None and self._activation.d == d:
            self._activation.add_list(codes)

    def _integral(self, d: int) -> bool:
        """Whether the first ``d`` genes are all discrete (their codes are integers, so
        ``_keys`` rounds nothing)."""
        if self._integral_d[0] != d:
            self._integral_d = (d, all(self._genes[name].kind != "cont" for name in self._names[:d]))
        return self._integral_d[1]

    def _counted_genes(self, d: int) -> list[int]:
        """The first ``d`` genes that get value counts of failures (discrete, at most
        ``_MAX_TABLE`` values)."""
        if self._counted[0] != d:
            genes = [self._genes[name] for name in self._names[:d]]
            self._counted = (d, [j for j, g in enumerate(genes) if g.kind != "cont" and g.n <= _MAX_TABLE])
        return self._counted[1]

    def _taken_finished(self) -> set[bytes]:
        d = len(self._names)
        if self._keys_d != d:
            self._keys = set(_keys(self._x[: self._n, :d]))
            self._keys_d = d
        return self._keys

    def _sync(self, study: Study) -> list[FrozenTrial]:
        trials = cached_trials(study)
        if self._study_id != study_id_of(study) or len(trials) < self._seen_upto:
            self._reset(study_id_of(study))
        numbers = [*self._pending, *range(self._seen_upto, len(trials))]
        pending = []
        n_obj = len(study.directions)
        signs = [1.0 if d == StudyDirection.MINIMIZE else -1.0 for d in study.directions]
        genes = self._genes
        for n in numbers:
            t = trials[n]
            if not t.distributions.keys() <= genes.keys():  # a new parameter (a set comparison is cheaper)
                for name, dist in t.distributions.items():
                    if name not in genes:
                        self._gene_for(name, dist)
            if not t.state.is_finished():
                pending.append(n)
                continue
            if not t.params:
                continue
            vals = [math.nan] * n_obj
            if t.state == TrialState.COMPLETE and t.values is not None and len(t.values) == n_obj:
                v = [s * float(x) for s, x in zip(signs, t.values)]
                if all(math.isfinite(x) for x in v):
                    vals = v
            self._add_row(t.params, vals, t.number)
            if self._binary_attr is not None:
                self._learn_binary(t)
        self._pending = pending
        self._seen_upto = len(trials)
        return trials

    def _learn_binary(self, t: FrozenTrial) -> None:
        """Binary evidence of a finished trial (the hook a compile objective fills)."""
        attrs = t.user_attrs
        binary = attrs.get(self._binary_attr)
        if self._learn_shapes and t.state == TrialState.COMPLETE and attrs.get("skipped_compile") and self._binaries.active:
            self._binaries.add_shape(self._x[self._n - 1, : len(self._names)])  # which genes it asked for
        if t.state != TrialState.COMPLETE or not isinstance(binary, str) or attrs.get("skipped_compile"):
            return
        predicted = attrs.get("predicted_binary")
        row = self._x[self._n - 1, : len(self._names)]
        self._binaries.set_ordered([self._genes[name].kind != "cat" for name in self._names])
        source = int(attrs["predicted_from"]) if predicted is not None and "predicted_from" in attrs else None
        if source is not None and predicted != binary:
            self._binaries.wrong_prediction(row, source)
        self._binaries.add(row, binary, t.number, predicted_from=source)

    def _tables(self) -> None:
        """Per-gene arrays used by the vectorised operators."""
        d = len(self._names)
        if self._tables_d == d:
            return
        genes = [self._genes[n] for n in self._names]
        self._kind = np.array([_KINDS[g.kind] for g in genes])
        self._size = np.array([g.size for g in genes])
        self._nval = np.array([float(max(g.n, 1)) if g.kind != "cont" else 1.0 for g in genes])
        self._sigma = np.array([g.sigma for g in genes])
        self._scale = np.where(self._kind == 0, 1.0 / np.maximum(1.0, self._nval - 1), 1.0)
        self._mutable = np.array([g.size > 1 for g in genes])
        self._tabled = self._kind != _KINDS["cont"]
        self._snap_cols = [j for j, g in enumerate(genes) if g.kind == "cont" and g.n]
        self._neighbourhoods = {}
        self._tables_d = d

    # ------------------------------------------------------------------ defaults

    def _resolve_defaults(self, study: Study) -> int | None:
        if self.population_size is not None:
            return self.population_size
        stored = storage_of(study).get_study_system_attrs(study_id_of(study)).get(_POOL_ATTR)
        if stored is None:
            if not self._genes:
                return None
            stored = default_pool_size(g.size for g in self._genes.values())
            storage_of(study).set_study_system_attr(study_id_of(study), _POOL_ATTR, stored)
        self.population_size = int(stored)
        return self.population_size

    def _survivors(self) -> int:
        if self._survivors_arg is not None:
            return self._survivors_arg
        return max(2, (self.population_size or 8) // 3)

    # ------------------------------------------------------------------ conditional parameters

    def _learn_activation(self) -> None:
        """For each parameter absent from some trials, find an earlier parameter whose values
        decide whether it is suggested (e.g. ``x.passed`` for ``x``).

        The evidence is kept up to date row by row (:class:`_Activation`, O(genes) per trial);
        it is rebuilt from every row only when a new parameter appears, and made only once some
        row lacks a parameter (until then no rule can hold)."""
        if self._rules_n == self._n:
            return
        d = len(self._names)
        if self._activation is None and not self._some_absent(d):
            self._rules, self._rules_n = [], self._n
            return
        if self._activation is None or self._activation.d != d:
            self._activation = _Activation(d)
            for row in self._x[: self._n, :d]:
                self._activation.add(row)
        self._rules = self._activation.rules()
        self._rules_n = self._n

    def _some_absent(self, d: int) -> bool:
        """Whether some row lacks one of the first ``d`` genes (see ``_first_absent``)."""
        return self._first_absent < d

    def _project(self, codes: np.ndarray) -> np.ndarray:
        """Genomes with the parameters that would not be suggested set to NaN."""
        for j, q, off in self._rules:
            q_codes = codes[:, q]
            codes[np.isnan(q_codes) | np.isin(q_codes, off), j] = math.nan
        return codes

    def _decode(self, row: np.ndarray) -> dict[str, Any]:
        genes = self._genes
        return {name: genes[name].decode(c) for name, c in zip(self._names, row.tolist()) if c == c}

    # ------------------------------------------------------------------ fitness

    def _order(self) -> np.ndarray:
        """Row indices of complete trials, best first (NSGA-II order for several objectives)."""
        if self._order_cache[0] == self._n:
            return self._order_cache[1]
        v = self._v[: self._n]
        if v.shape[1] == 1:
            order = self._sorted_rows()
        else:
            ok = np.where(~np.isnan(v[:, 0]))[0]
            vo = v[ok]
            ranks = non_domination_rank(vo) if len(ok) else np.empty(0, dtype=int)
            crowd = np.zeros(len(ok))
            for r in np.unique(ranks):
                m = np.where(ranks == r)[0]
                crowd[m] = _crowding(vo[m])
            order = ok[np.lexsort((-crowd, ranks))]
        self._order_cache = (self._n, order)
        return order

    def _sorted_rows(self) -> np.ndarray:
        """One objective: the complete rows by value, ties by row (a stable sort), kept up to date
        by inserting the rows added since the last call (O(rows) memory moves, no sort)."""
        rows, order, keys = self._sorted
        n = self._n
        if n - rows > 64:
            v = self._v[:n, 0]
            ok = np.where(~np.isnan(v))[0]
            order = ok[np.argsort(v[ok], kind="stable")]
            keys = v[order].tolist()
        else:
            for i in range(rows, n):
                value = float(self._v[i, 0])
                if not math.isnan(value):
                    at = bisect.bisect_right(keys, value)  # after equal values
                    order = np.concatenate((order[:at], [i], order[at:]))
                    keys.insert(at, value)
        self._sorted = (n, order, keys)
        return order

    def _badness(self, order: np.ndarray) -> np.ndarray:
        """Per row: its position in ``order`` over the length of ``order`` (the fitness rank in
        [0, 1)); 1 for a row not in it (a failed trial)."""
        if self._badness_cache[0] is not order or len(self._badness_cache[1]) != self._n:
            bad = np.ones(self._n)
            bad[order] = np.arange(len(order)) / max(1, len(order))
            self._badness_cache = (order, bad)
        return self._badness_cache[1]

    # ------------------------------------------------------------------ stagnation

    def _last_improvement(self) -> int:
        """Number of the last trial that improved on every trial numbered before it (for several
        objectives: that no earlier trial dominates or equals), -1 if none; from the finished
        trials alone, so every worker of a study derives the same value."""
        if self._improve_cache[0] == self._n:
            return self._improve_cache[1]
        state = self._improve_state
        if state is not None and state[0] <= self._n:
            rows, last, best, top = state
            for i in range(rows, self._n):  # rows added since, in number order: O(1) (one objective)
                vi = self._v[i]
                if math.isnan(vi[0]):
                    continue
                num = int(self._num[i])
                if num < top:
                    break  # finished out of number order (parallel workers): scan again
                if len(vi) == 1:
                    better = vi[0] < best
                else:  # no earlier complete trial dominates or equals it
                    prev = self._v[:i]
                    better = not np.all(prev[~np.isnan(prev[:, 0])] <= vi, axis=1).any()
                if better:
                    last, best = num, min(best, float(vi[0]))
                top = num
            else:
                self._improve_state = (self._n, last, best, top)
                self._improve_cache = (self._n, last)
                return last
        v = self._v[: self._n]
        ok = np.where(~np.isnan(v[:, 0]))[0]
        last = -1
        if len(ok):
            ok = ok[np.argsort(self._num[ok], kind="stable")]
            vo = v[ok]
            if vo.shape[1] == 1:
                prev = np.concatenate([[math.inf], np.minimum.accumulate(vo[:, 0])[:-1]])
                better = np.where(vo[:, 0] < prev)[0]
            else:
                better = [
                    i
                    for i in range(len(vo))
                    if not (np.all(vo[:i] <= vo[i], axis=1)).any()
                ]
            if len(better):
                last = int(self._num[ok[better[-1]]])
        top = int(self._num[ok[-1]]) if len(ok) else -1
        best = float(v[ok, 0].min()) if len(ok) else math.inf
        self._improve_state = (self._n, last, best, top)
        self._improve_cache = (self._n, last)
        return last

    def stagnation(self, study: Study, generation: int | None = None) -> tuple[int, int | None]:
        """(whole generations without improvement, first generation of the current restart or
        None) for ``generation`` (default: the generation of the next trial).

        The search has stagnated when no trial of ``_STALL_GENS`` whole generations improved on
        the trials before it.  The next generation then restarts: a quarter of it explores the
        part of the space farthest from every evaluated trial (failure-prone values avoided), and
        in the following generations a quarter of the children breed from the best trials of the
        restart (an elite of their own, so a new basin has time to develop), the rest from the
        study's elite, which is kept.  While nothing improves, a new restart follows every ``_EPOCH_GENS``
        generations; the first improvement ends the restart.  Everything is derived from the
        trials in storage (numbers and values), so all workers agree.
        """
        with self._lock:
            self._sync(study)
            pool = self._resolve_defaults(study) or 1
            if generation is None:
                generation = len(cached_trials(study)) // pool
            return self._stagnation_at(generation, pool)

    def _stagnation_at(self, generation: int, pool: int) -> tuple[int, int | None]:
        last = self._last_improvement()
        if last < 0:
            return 0, None
        stalled = max(0, generation - last // pool - 1)
        if stalled < self._stall_gens:
            return stalled, None
        first = last // pool + 1 + self._stall_gens
        return stalled, first + (generation - first) // self._epoch_gens * self._epoch_gens

    def _explore_pick(self, cands: np.ndarray, order: np.ndarray) -> int:
        """Index of the candidate farthest from every evaluated trial, failure risk weighed in.
        Only the 16 candidates made of the least evaluated and least failure-prone values are
        measured against the trials (the distances to a thousand trials would cost more than the
        rest of a trial)."""
        n = self._n
        if len(cands) > 16:
            novel = (1.0 - self._value_counts(order).rarity(cands)) * (1.0 - self._fail_risk(cands))
            best = np.argsort(-novel, kind="stable")[:16]
            return int(best[self._explore_pick(cands[best], order)])
        idx = np.arange(max(0, n - 4 * self._window), n)
        near = self._distances(cands, idx, 0).min(axis=1) if len(idx) else np.ones(len(cands))
        score = near * (1.0 - self._fail_risk(cands))
        return int(np.argmax(score + self._rng.uniform(0.0, 1e-6, len(score))))

    # ------------------------------------------------------------------ Optuna hooks

    def infer_relative_search_space(self, study: Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return {}

    def sample_relative(
        self, study: Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        return {}

    def select_parent(self, study: Study, generation: int) -> list[FrozenTrial]:
        """The survivors among complete trials of generations before ``generation``."""
        with self._lock:
            trials = self._sync(study)
            pool = self._resolve_defaults(study) or 1
            done = [
                t
                for t in trials
                if t.state == TrialState.COMPLETE and t.number // pool < generation and t.values
            ]
            signs = [1.0 if d == StudyDirection.MINIMIZE else -1.0 for d in study.directions]
            done.sort(key=lambda t: [s * v for s, v in zip(signs, t.values, strict=True)])
            return done[: self._survivors()]

    def get_trial_generation(self, study: Study, trial: FrozenTrial) -> int:
        """Generation of a trial: its number divided by the pool size."""
        pool = self._resolve_defaults(study)
        return 0 if pool is None else trial.number // pool

    def before_trial(self, study: Study, trial: FrozenTrial) -> None:
        with self._lock:
            self._random.before_trial(study, trial)
            trials = self._sync(study)
            if not self._genes:
                return
            pool = self._resolve_defaults(study) or 1
            fixed = trial.system_attrs.get("fixed_params") or {}
            running: set[bytes] = set()
            for n in self._pending:
                t = trials[n]
                if t.number != trial.number:
                    running.update(_keys(self._encode(self._running_params(t))[None, :]))
            taken = _Taken(self._taken_finished(), running)
            self._learn_activation()
            self._tables()
            if self._open_one_class:
                self._binaries.domains = np.where(self._kind == _KINDS["cont"], 0.0, self._nval)
            prediction = None
            for tries_left in range(_CLAIM_TRIES - 1, -1, -1):
                plan, prediction = self._plan(trial.number, pool, fixed, taken)
                if not fixed and not isinstance(plan, _Exhausted):
                    done = self._completed(study, trial, plan, taken)
                    if done is None and tries_left:  # every completion drawn is in the study: plan again
                        taken.running.update(_keys(self._encode(plan)[None, :]))
                        continue
                    if done is not None and done is not plan and self._predict_completed and self._binaries.active:
                        prediction = self._binaries.predict(self._encode(done)[None, :])[0]
                    plan = done or plan
                self._plans[trial_id_of(trial)] = plan
                if isinstance(plan, _Exhausted):
                    _LOG.warning(plan.message)
                    try:
                        study.stop()
                    except RuntimeError:
                        pass
                    return
                storage_of(study).set_trial_system_attr(trial_id_of(trial), _KEY_ATTR, json.dumps(plan))
                if fixed or isinstance(storage_of(study), InMemoryStorage):
                    break
                claims = self._claims(study, trial)
                if plan not in claims:
                    break
                for other in claims:  # plan again, avoiding every configuration claimed by now
                    taken.running.update(_keys(self._project(self._encode(other)[None, :])))
            if prediction is not None and not trial.user_attrs.get(_COMPILE_REQUIRED):
                self._announce(study, trial, prediction)

    def _open_genes(self, plan: dict[str, Any]) -> list[str]:
        """Genes the plan leaves out although a learnt rule says its values switch them on (e.g.
        ``x`` after ``x.passed`` became True in a child of a parent without ``x``): the objective
        will ask for them."""
        names = self._names
        out = []
        for j, q, off in self._rules:
            if names[j] not in plan and names[q] in plan:
                code = self._genes[names[q]].encode(plan[names[q]])
                if not np.isin(code, off):
                    out.append(names[j])
        return out

    def _completed(
        self, study: Study, trial: FrozenTrial, plan: dict[str, Any], taken: _Taken
    ) -> dict[str, Any] | None:
        """The plan with its open genes (:meth:`_open_genes`, then those they switch on) drawn
        now, before it is claimed, as the random sampler would draw them when the objective asks
        (the first draw is the value the objective would have got), drawn again while the
        configuration is in the study (finished, running or claimed): the claim is then the
        whole configuration run, which other workers check theirs against.  None when each of
        ``_COMPLETE_DRAWS`` draws was in the study."""
        if not self._open_genes(plan):
            return plan
        for _ in range(_COMPLETE_DRAWS):
            done = dict(plan)
            while names := self._open_genes(done):
                for name in names:
                    done[name] = self._random.sample_independent(study, trial, name, self._genes[name].dist)
            if _keys(self._encode(done)[None, :])[0] not in taken:
                return done
        return None

    def _announce(self, study: Study, trial: FrozenTrial, prediction: tuple[str, int, int]) -> None:
        """Tell the objective that this trial's binary is predicted to be one already compiled:
        user attributes ``predicted_binary``, ``predicted_from`` (that trial's number) and
        ``skip_compile`` (True unless this trial is one of the rare checks of a prediction).
        An objective that knows the hook reuses that trial's values instead of compiling."""
        binary, number, doubt = prediction
        # a doubtful prediction (BinaryModel.predict) is checked more, the more doubt the more
        rate = self._check_rate if not doubt else 1.0 - (1.0 - self._untested_check_rate) ** doubt
        if doubt < len(self._fewer_checks):
            rate = self._fewer_checks[doubt]
        skip = bool(self._rng.rand() >= rate)
        for key, value in (("predicted_binary", binary), ("predicted_from", number), ("skip_compile", skip)):
            storage_of(study).set_trial_user_attr(trial_id_of(trial), key, value)
            # The trial object Optuna passes here is the one ``optuna.Trial.user_attrs`` reads.
            trial.user_attrs[key] = value

    def _claims(self, study: Study, trial: FrozenTrial) -> list[dict[str, Any]]:
        """The configurations of all other trials, read fresh from the storage (a clashing trial
        may already have finished).

        Each worker writes its claim and then reads the others', so of two workers that plan the
        same configuration at the same time at least one sees the other and plans again.
        """
        others = storage_of(study).get_all_trials(study_id_of(study), deepcopy=False)
        # Trials seen finished at the last sync are already in the finished keys: only the others
        # can clash (O(new trials), not O(study)).
        numbers = [*self._pending, *range(self._seen_upto, len(others))]
        return [self._running_params(others[n]) for n in numbers if n < len(others) and n != trial.number]

    @staticmethod
    def _running_params(t: FrozenTrial) -> dict[str, Any]:
        stored = t.system_attrs.get(_KEY_ATTR)
        if stored is not None:
            return json.loads(stored)
        return {**t.params, **(t.system_attrs.get("fixed_params") or {})}

    def sample_independent(
        self, study: Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution
    ) -> Any:
        plan = self._plans.get(trial_id_of(trial))
        if isinstance(plan, _Exhausted):
            raise TrialPruned(plan.message)
        if plan is not None and param_name in plan:
            value = plan[param_name]
            try:
                if contains(param_distribution, value):
                    return value
            except (ValueError, TypeError):
                pass
        value = self._random.sample_independent(study, trial, param_name, param_distribution)
        if plan is not None and not isinstance(storage := storage_of(study), InMemoryStorage):
            # A parameter unknown when the trial was planned: complete the claim other workers see.
            plan[param_name] = value
            storage.set_trial_system_attr(trial_id_of(trial), _KEY_ATTR, json.dumps(plan))
        return value

    def after_trial(
        self, study: Study, trial: FrozenTrial, state: TrialState, values: Sequence[float] | None
    ) -> None:
        with self._lock:
            self._plans.pop(trial_id_of(trial), None)
            if self.population_size is None:
                for name, dist in trial.distributions.items():
                    self._gene_for(name, dist)
            pool = self._resolve_defaults(study)
        if pool is not None:
            gen = trial.number // pool
            storage_of(study).set_trial_user_attr(trial_id_of(trial), "generation", gen)
            storage_of(study).set_trial_system_attr(trial_id_of(trial), self._get_generation_key(), gen)
        self._random.after_trial(study, trial, state, values)

    # ------------------------------------------------------------------ making children

    def _design_share(self) -> float:
        """The share of generation 0 from the QMC design: ``design_start``, or by default none
        in a compiler study (a finished trial carried ``binary_attr``)."""
        if self._design_auto and self._binaries.active:
            return 0.0
        return self._g0_qmc

    def _plan(
        self, number: int, pool_size: int, fixed: dict[str, Any], taken: _Taken
    ) -> tuple[dict[str, Any] | _Exhausted, tuple[str, int, int] | None]:
        """The next configuration: in generation 0 a design point (:class:`QMCStart`) or a fresh
        random one, else the most promising of several fresh children (stronger mutation and
        random ones join when few are fresh); in a restart (see :meth:`stagnation`) explorers or
        children of the restart's elite.  Second: (binary, trial number) when its binary is
        predicted to be one already compiled."""
        generation = number // pool_size
        fixed_row = self._encode(fixed) if fixed else None
        fixed_cols = np.where(~np.isnan(fixed_row))[0] if fixed else []
        order = self._order()
        early = generation == 0 and breeds_early(number, pool_size, self._g0_breed, len(order), self._g0_every)
        evolve = (generation > 0 or early) and len(order) > 0
        parents, explore, stalled, start = order, False, 0, None
        if evolve and not fixed:
            stalled, start = self._stagnation_at(generation, pool_size)
            slot = number % pool_size
            if start is not None and generation == start:
                explore = slot < math.ceil(self._explore_share * pool_size)
            elif start is not None and slot >= round(self._epoch_global * pool_size):
                parents = order[self._num[order] >= start * pool_size]
                explore = len(parents) < 2
        ls_now = start is None or (
            (self._ls_restart == 1 or (self._ls_restart == 2 and parents is order)) and self._failing_since_improvement() < self._ls_restart_fail
        )
        if evolve and not fixed and not explore and ls_now and self._local_turn(number, self._ls_stalled(number, pool_size, stalled), start is not None):
            local = self._local(order, taken, number)
            if local is not None:
                guess = self._binaries.predict(local) if self._binaries.active else [None] * len(local)
                new = [i for i, p in enumerate(guess) if p is None]
                if self._ls_avoid_repeats and 0 < len(new) < len(local):  # a move of a gene inert here teaches nothing
                    local, guess = local[new], [None] * len(new)
                i = int(np.argmin(self._knn_score(local, order))) if len(local) > 1 else 0
                return self._decode(local[i]), guess[i]
        pool: list[np.ndarray] = []  # blocks of fresh candidate rows
        n_fresh = 0
        seen: set[bytes] = set()
        last = None
        checked = True  # every block in the pool holds table codes (see _bred)
        for attempt in range(6):
            keys, codes_ok = None, False
            if evolve and attempt < 4 and not explore:
                cands, keys, codes_ok = self._bred(parents, self._n_children(), strength=1.0 + attempt)
            elif explore and attempt < 5:
                cands = self._random_genomes(_EXPLORE_CANDIDATES)
            elif not evolve and attempt == 0 and 0 < number < math.ceil(self._design_share() * pool_size):
                cands = self._qmc.rows(0, number - 1 + _QMC_ROWS, [self._genes[n] for n in self._names])
            else:
                cands = self._random_genomes(64 if attempt < 5 else 512)
                if self._g0_sobol and not evolve and attempt == 0:
                    cands[0] = self._sobol.row(number, self._kind, self._nval)
            for j in self._snap_cols:
                cands[:, j] = self._genes[self._names[j]].snap(cands[:, j])
            if len(fixed_cols):
                cands[:, fixed_cols] = fixed_row[fixed_cols]
                codes_ok = False
            cands = self._project(cands)
            last = cands
            if keys is None or self._snap_cols or self._rules or len(fixed_cols):  # rows changed since bred
                keys = _keys(cands, self._integral(len(self._names)))
            # As the compile objective will see them (conditions learnt from its trials): a plan
            # whose unused genes differ is not a new configuration.
            as_run = _keys(self._binaries.project(cands)) if self._binaries.active and not fixed else None
            new = _unseen(keys, taken, seen, as_run)
            if new:
                pool.append(cands[new])
                n_fresh += len(new)
                checked = checked and codes_ok
            if n_fresh and (not evolve or n_fresh >= _MIN_FRESH or attempt >= 3):
                break
        if not pool:
            if fixed and last is not None:
                # The user fixed these values (enqueue_trial): run them even if seen before.
                return {**self._decode(last[0]), **fixed}, None
            return self._enumerate(taken), None
        fresh = pool[0] if len(pool) == 1 else np.concatenate(pool)
        predicted: list[tuple[str, int, int] | None] = [None] * len(fresh)
        if self._binaries.active and (not fixed or self._predict_fixed):
            predicted = self._binaries.predict(fresh)
            new = [i for i, p in enumerate(predicted) if p is None]
            if self._avoid_repeats and not fixed and 0 < len(new) < len(fresh):  # spend the trial on a new binary
                fresh, predicted = fresh[new], [None] * len(new)
        if not evolve and len(fresh) > 1 and not fixed and (self._g0_fill or self._g0_guide or self._g0_safe):
            i = self._first_pick(fresh, order)
        elif len(fresh) == 1 or not evolve:
            i = 0
        elif explore or (early and self._g0_spread):
            i = self._explore_pick(fresh, order)
        else:
            i = self._pick(fresh, order, checked=checked)
        return self._decode(fresh[i]), predicted[i]

    def _failing_since_improvement(self) -> float:
        """Share of the trials numbered after the last improvement that failed (0 when none)."""
        if self._ls_restart_fail >= 1.0:
            return 0.0
        since = self._num[: self._n] > self._last_improvement()
        count = int(since.sum())
        return float(np.isnan(self._v[: self._n, 0][since]).sum()) / count if count else 0.0

    def _local_turn(self, number: int, stalled: int, restart: bool = False) -> bool:
        """Whether trial ``number`` is a local-search trial: a share ``_ls_share`` of the trials,
        ``_ls_stall`` once ``_ls_gens`` whole generations brought no improvement
        (``_ls_restart_share`` while a restart runs), spread evenly over the trial numbers."""
        if stalled < self._ls_gens:
            share = self._ls_share
        else:
            share = self._ls_restart_share if restart else self._ls_stall
        return share > 0 and math.floor((number + 1) * share) > math.floor(number * share)

    def _ls_stalled(self, number: int, pool_size: int, stalled: int) -> int:
        """Whole generations without improvement as the local search counts them: with
        ``_ls_window``, at least ``_ls_gens`` once more than ``_ls_window * pool_size`` trials were
        numbered since the last improvement (from trial numbers and values: every worker agrees)."""
        if self._ls_window > 0 and number - self._last_improvement() > self._ls_window * pool_size:
            return max(stalled, self._ls_gens)
        return stalled

    def _local(self, order: np.ndarray, taken: _Taken, number: int = 0) -> np.ndarray | None:
        """Unseen one-gene neighbours of the best trial, else of the next survivor (in elite
        order), leaving out those likelier to fail than ``_ls_risk`` and than the trial they
        come from; None when every survivor's neighbourhood is done.  On a small discrete space
        this walks the neighbourhood of the best trial, which the random children may miss for
        hundreds of trials.  With ``_ls_two``, once that share of a trial's one-gene neighbourhood
        is in the study, trial numbers ``number`` spread evenly over half of the turns take its
        two-gene moves first."""
        d = len(self._names)
        survivors = self._elite(order)[: self._ls_survivors]
        two_turn = self._ls_two > 0 and self._ls_depth >= 2 and (number * _GOLDEN) % 1.0 < 0.5
        two_empty = False  # this survivor's kept two-gene neighbourhood just gave nothing
        for r, depth in itertools.product(survivors, range(1, self._ls_depth + 1)):
            if depth == 2 and two_empty:
                continue  # the same call again would give nothing again (kept: no new draws)
            row = self._x[r, :d]
            cands, done = self._local_moves(row, depth, order, taken)
            two_empty = False
            if depth == 1 and two_turn and done >= self._ls_two:
                two, _ = self._local_moves(row, 2, order, taken)
                cands = two if len(two) else cands
                two_empty = not len(two) and (row.tobytes(), 2) in self._neighbourhoods
            if len(cands):
                return cands
        return None

    def _local_moves(self, row: np.ndarray, depth: int, order: np.ndarray, taken: _Taken) -> tuple[np.ndarray, float]:
        """The unseen ``depth``-gene neighbours of ``row`` that local search may take (see
        :meth:`_local`), and the share of its neighbourhood already in the study."""
        d = len(self._names)
        kept = self._neighbours(row, depth)
        cands = kept.rows
        as_made = not (self._snap_cols or self._rules)
        if not as_made:  # both change rows in place
            cands = cands.copy()
            for j in self._snap_cols:
                cands[:, j] = self._genes[self._names[j]].snap(cands[:, j])
            cands = self._project(cands)
            keys = _keys(cands, self._integral(d))
        else:  # the neighbourhood as made: its keys are made once too
            keys = self._kept_keys(kept)
        new = self._kept_unseen(kept, keys, taken) if as_made else _unseen(keys, taken, set())
        if new and self._binaries.active:  # as the compile objective will run them (see _plan)
            as_run = _keys(self._binaries.project(cands[new]))
            new = [i for i, k in zip(new, as_run, strict=True) if k not in taken]
        done = 1.0 - len(new) / len(cands) if len(cands) else 1.0
        if not new:
            return cands[:0], done
        cands = cands[new]
        safe = self._fail_risk(cands) <= max(self._ls_risk, float(self._fail_risk(row[None, :])[0]))
        cands = cands[safe]
        hit = None  # the keys of each pair's two one-gene moves, made once for both uses
        if depth == 2 and as_made and (self._ls_pairs or self._ls_repair):
            if kept.moves is None:  # a move's key does not depend on which pairs are still unseen
                kept.moves = pair_move_keys(row, kept.rows, lambda m: _keys(self._project(m)))
            at = np.asarray(new)[safe]
            hit = (kept.moves[0], kept.moves[1][at], kept.moves[2][at])
        elif depth == 2 and self._ls_pairs and len(cands) > self._ls_pairs:
            hit = pair_move_keys(row, cands, lambda m: _keys(self._project(m)))
        if depth == 2 and self._ls_repair:
            failed = self._failed_keys()
            ok = taken.finished - failed if self._ls_repair == 2 else None
            fix = repairs(row, cands, failed, lambda m: _keys(self._project(m)), ok, hit)
            if fix.any():
                cands = cands[fix]
                hit = None if hit is None else (hit[0], hit[1][fix], hit[2][fix])
        if depth == 2 and self._ls_pairs and len(cands) > self._ls_pairs:
            score = self._pair_scores(row, cands, order, hit)
            return cands[np.argsort(score, kind="stable")[: self._ls_pairs]], done
        if len(cands) > self._ls_keep:  # the nearest-neighbour pick compares the most typical ones
            cands = cands[np.argsort(self._value_counts(order).score(cands), kind="stable")[: self._ls_keep]]
        return cands, done

    def _kept_keys(self, kept: _Neighbourhood) -> list[bytes]:
        """The keys of a kept neighbourhood's rows as made, made once."""
        if kept.keys is None:
            kept.keys = _keys(kept.rows, self._integral(len(self._names)))
        return kept.keys

    @staticmethod
    def _kept_unseen(kept: _Neighbourhood, keys: list[bytes], taken: _Taken) -> list[int]:
        """``_unseen(keys, taken, set())`` of a kept neighbourhood, checking against the finished
        configurations only the rows not finished at the last call: the sampler's set of finished
        keys only grows (a new study or new genes make a new set, and the check starts over)."""
        finished, running = taken.finished, taken.running
        memo = kept.unseen
        rows = memo[1] if memo is not None and memo[0] is finished else range(len(keys))
        free = [i for i in rows if keys[i] not in finished]
        kept.unseen = (finished, free)
        return _first_new(keys, [i for i in free if keys[i] not in running], set())

    def _pair_scores(
        self, row: np.ndarray, cands: np.ndarray, order: np.ndarray, hit: tuple[list[bytes], np.ndarray, np.ndarray] | None = None
    ) -> np.ndarray:
        """Per two-gene neighbour of ``row``: the sum of its two one-gene moves' ranks in [0, 1)
        among the evaluated complete one-gene neighbours of ``row`` (by the fitness order;
        ``_ls_pair_unknown`` for a move that failed or is not in the study); ``hit``: the moves'
        keys (:func:`pair_move_keys`) when already made."""
        rows = self._row_of_key()
        bad = self._badness(order)
        kept = self._neighbours(row, 1)
        if self._rules or self._snap_cols:
            single = _keys(self._project(kept.rows.copy()))
        else:  # the one-gene neighbourhood as made, whose keys _local_moves keeps
            single = self._kept_keys(kept)
        ranks = sorted(b for b in (bad[rows[k]] for k in single if k in rows) if b < 1.0)
        unique, first, second = hit or pair_move_keys(row, cands, lambda m: _keys(self._project(m)))
        b = np.array([bad[rows[key]] if key in rows else 1.0 for key in unique], dtype=float)
        rank = np.searchsorted(np.asarray(ranks, dtype=float), b, side="left") / max(1, len(ranks))
        move = np.where(b < 1.0, rank, self._ls_pair_unknown)
        score = move[first] + move[second]
        return score

    def _row_of_key(self) -> dict[bytes, int]:
        """Row of each finished configuration's key (the latest row of a key run twice), brought
        up to date with the rows added since the last call."""
        upto, d, rows = self._key_rows
        if d != len(self._names) or upto > self._n:
            upto, d, rows = 0, len(self._names), {}
        if upto < self._n:
            rows.update(zip(_keys(self._x[upto : self._n, :d]), range(upto, self._n), strict=True))
        self._key_rows = (self._n, d, rows)
        return rows

    def _neighbours(self, row: np.ndarray, depth: int) -> _Neighbourhood:
        """:func:`neighbours` of a genome, kept while that draws no random numbers (the result is
        then the same every time: local search walks the same best trials again and again), else
        for ``_ls_keep_drawn`` finished trials."""
        key = (row.tobytes(), depth)
        kept = self._neighbourhoods.get(key)
        if kept is not None and kept.drawn_at is not None and not 0 <= self._n - kept.drawn_at < self._ls_keep_drawn:
            kept = None
        if kept is None:
            drawn = draws_random(row, self._kind, self._nval)
            kept = _Neighbourhood(neighbours(row, self._kind, self._nval, self._rng, depth), self._n if drawn else None)
            if not drawn or self._ls_keep_drawn > 0:
                if len(self._neighbourhoods) >= 64:
                    self._neighbourhoods.clear()
                self._neighbourhoods[key] = kept
        return kept

    def _failed_keys(self) -> set[bytes]:
        """Keys of the failed configurations, brought up to date with the rows added since the
        last call (rows never change once added)."""
        upto, d, failed = self._failed_cache
        if d != len(self._names) or upto > self._n:
            upto, d, failed = 0, len(self._names), set()
        if upto < self._n:
            rows = upto + np.where(np.isnan(self._v[upto : self._n, 0]))[0]
            failed.update(_keys(self._x[rows, :d]))
        self._failed_cache = (self._n, d, failed)
        return failed

    def _first_pick(self, cands: np.ndarray, order: np.ndarray) -> int:
        """Pick in generation 0: by the value statistics and failure risk once ``_g0_guide``
        trials finished with at least two complete ones, else (``_g0_safe``, once a trial failed)
        the least failure-prone of the first ``_g0_safe`` candidates, else (``_g0_fill``) the
        candidate made of the least tried values, else the first (random) one."""
        if self._g0_guide and self._n >= self._g0_guide and len(order) >= 2:
            score = self._value_counts(order).score(cands) + self._fail_risk(cands)
            return int(np.argmin(score + self._rng.uniform(0.0, 1e-6, len(score))))
        if self._g0_safe and self._n_failed:
            risk = self._fail_risk(cands[: self._g0_safe])
            return int(np.argmin(risk + self._rng.uniform(0.0, 1e-6, len(risk))))
        if self._g0_fill and self._n:
            rarity = self._value_counts(order).rarity(cands)
            return int(np.argmin(rarity + self._rng.uniform(0.0, 1e-6, len(rarity))))
        return 0

    def _enumerate(self, taken: _Taken) -> dict[str, Any] | _Exhausted:
        total = float(np.prod(self._size))
        if total > _ENUMERATE_LIMIT:
            return _Exhausted(
                "GeneticSampler: no unseen configuration found after repeated tries in a space of "
                f"~{total:.3g} configurations; stopping the study."
            )
        grids = []
        for name in self._names:
            g = self._genes[name]
            if g.kind == "cont":  # a log-scaled integer: every integer of its range
                grids.append(np.array([g.encode(v) for v in range(g.dist.low, g.dist.high + 1)]))
            else:
                grids.append(np.arange(max(1, g.n), dtype=float))
        mesh = np.stack(np.meshgrid(*grids, indexing="ij"), -1).reshape(-1, len(self._names))
        mesh = self._project(mesh)
        keys = _keys(mesh)
        unseen = [i for i, k in enumerate(keys) if k not in taken]
        if not unseen:
            return _Exhausted(
                f"GeneticSampler: all {len(set(keys))} distinct configurations of the search space "
                "have been evaluated or are running; stopping the study."
            )
        return self._decode(mesh[unseen[self._rng.randint(len(unseen))]])

    def _random_genomes(self, m: int) -> np.ndarray:
        d = len(self._names)
        u = self._rng.rand(m, d)
        return np.where(self._kind == _KINDS["cont"], u, np.floor(u * self._nval))

    def _children(self, order: np.ndarray, m: int, strength: float) -> np.ndarray:
        """``m`` children of the survivors: tournament, crossover, mutation.

        Children of one elite are independent draws, so they are bred ``_child_batch`` at a time
        and handed out to the following trials while the elite (and ``strength``) stays the same:
        the cost of breeding is shared by many trials."""
        return self._bred(order, m, strength)[0]

    def _bred(self, order: np.ndarray, m: int, strength: float) -> tuple[np.ndarray, list[bytes], bool]:
        """:meth:`_children`, with what was worked out once for their whole batch: their keys
        (``_keys``) and whether every discrete gene holds a table code (:meth:`_table_codes`)."""
        d = len(self._names)
        x = self._x[self._elite(order), :d]
        key = (x.tobytes(), d, strength)
        batch = self._child_batches.get(key)
        if batch is None or batch[1] + m > len(batch[0]):
            if len(self._child_batches) >= 16:
                self._child_batches.clear()
            rows = self._breed(x, max(m, self._child_batch), strength)
            batch = self._child_batches[key] = [rows, 0, _keys(rows, self._integral(d)), self._table_codes(rows)]
        start = batch[1]
        batch[1] += m
        return batch[0][start : start + m].copy(), batch[2][start : start + m], batch[3]

    def _table_codes(self, rows: np.ndarray) -> bool:
        """Whether every discrete gene of ``rows`` is absent (NaN) or an integer code below its
        number of values: then the distance and failure tables need not check them."""
        return bool((table_codes(rows, self._nval) | ~self._tabled).all())

    def _breed(self, x: np.ndarray, m: int, strength: float) -> np.ndarray:
        """``m`` children of the elite rows ``x`` (sorted best first)."""
        if self._draws == "pcg":
            tables = (self._kind, self._nval, self._sigma)
            args = (self._crossover, self._crossover_prob, self._mutable, self._mutate_arg, tables)
            return breed(self._gen, x, m, strength, *args)
        rng = self._rng
        k, d = x.shape
        pa = x[np.minimum(rng.randint(0, k, m), rng.randint(0, k, m))]  # rows sorted best first
        pb = x[np.minimum(rng.randint(0, k, m), rng.randint(0, k, m))]
        child = pa.copy()
        if self._crossover != "none" and k > 1:
            if self._crossover == "uniform":
                mask = rng.rand(m, d) < 0.5
            else:
                cuts = np.sort(rng.randint(0, d + 1, (m, 2)), axis=1)
                if self._crossover == "onepoint":
                    cuts[:, 1] = d
                cols = np.arange(d)
                mask = (cols >= cuts[:, :1]) & (cols < cuts[:, 1:])
            mask &= (rng.rand(m) < self._crossover_prob)[:, None] & ~np.isnan(pb)
            child = np.where(mask, pb, pa)
        mutable = np.where(self._mutable)[0]
        if len(mutable) == 0:
            return child
        rate = self._mutate_arg if self._mutate_arg is not None else 1.0 / len(mutable)
        mut = (rng.rand(m, d) < min(1.0, rate * strength)) & self._mutable
        none = ~mut.any(axis=1)
        mut[np.where(none)[0], rng.choice(mutable, int(none.sum()))] = True
        return self._mutate(child, strength, mut)

    def _elite(self, order: np.ndarray) -> np.ndarray:
        """The survivors, best first; with niching, each farther than the niche radius from the
        better ones (so one local optimum cannot fill the whole elite)."""
        s = self._survivors()
        if not self._niche or len(order) <= s:
            return order[:s]
        cand = order[: 8 * s]
        quick = (len(self._names), cand.tobytes())  # cheaper to compare than ``key``
        if self._elite_quick[0] == quick and self._elite_quick[1] is self._elite_cache:
            return self._elite_cache[1]  # the same top rows as at the last call
        elite = self._niche_elite(cand, s)
        self._elite_quick = (quick, self._elite_cache)
        return elite

    def _niche_elite(self, cand: np.ndarray, s: int) -> np.ndarray:
        """:meth:`_elite` of the top rows ``cand``."""
        key = (len(self._names), *cand.tolist())
        if self._elite_cache[0] == key:  # most new trials do not enter the top rows
            return self._elite_cache[1]
        kept = self._elite_kept(key, s)
        if kept is not None:
            self._elite_cache = (key, kept)
            return kept
        dist = self._pair_distances(cand)
        # bit r of column i: row r is outside row i's niche (Python integers as bit sets)
        packed = np.packbits(dist.T >= self._niche, axis=1, bitorder="little")
        chosen = [0]
        free = int.from_bytes(packed[0].tobytes(), "little") & ~1  # not within a chosen row's niche
        while len(chosen) < s and free:
            i = (free & -free).bit_length() - 1  # the best row left outside every chosen row's niche
            chosen.append(i)
            free &= int.from_bytes(packed[i].tobytes(), "little")
            free &= ~((2 << i) - 1)
        self._elite_cache = (key, cand[chosen])
        return cand[chosen]

    def _elite_kept(self, key: tuple, s: int) -> np.ndarray | None:
        """The elite for the top rows ``key`` (genes, rows) worked out from the last one when a
        single row entered them (the last row dropping out) and it cannot be chosen: the niche
        pass then takes the same rows, less the dropped one; None when it must run again."""
        last_key, last = self._elite_cache
        if len(last_key) != len(key) or last_key[0] != key[0]:
            return None
        p = next((i for i in range(1, len(key)) if key[i] != last_key[i]), len(key))
        if p == len(key) or key[p + 1 :] != last_key[p:-1]:
            return None
        rows = last.tolist()
        better = set(last_key[1:p])
        before = [r for r in rows if r in better]  # chosen rows better than the new one
        if not before:
            return None  # the new row is the best: it is chosen
        if len(before) < s:
            d = key[0]
            dist = self._distances(self._x[[key[p]], :d], np.array(before))
            if not (dist < self._niche).any():
                return None  # outside every better chosen row's niche: chosen
        dropped = last_key[-1]
        return last if dropped not in rows else np.array([r for r in rows if r != dropped], dtype=last.dtype)

    def _pair_distances(self, rows: np.ndarray) -> np.ndarray:
        """``_distances`` of the evaluated rows ``rows`` to themselves.  The pairs of the last call
        are reused (the top rows change by a row or two at a time); a new row's distances are
        worked out once, as a distance is symmetric bit for bit (``|a - b| == |b - a|``)."""
        d = len(self._names)
        last_d, last_rows, last = self._pairs
        if last is not None and last_d == d:
            where = {r: i for i, r in enumerate(last_rows.tolist())}
            at = np.array([where.get(r, -1) for r in rows.tolist()], dtype=np.intp)
            new = np.flatnonzero(at < 0)
            if len(new) <= len(rows) // 4:
                at[new] = 0  # any row: the new rows and columns are written below
                dist = last.take(at, axis=0).take(at, axis=1)
                if len(new):
                    fresh = self._distances(self._x[rows[new], :d], rows)
                    dist[new] = fresh
                    dist[:, new] = fresh.T
                self._pairs = (d, rows, dist)
                return dist
        dist = self._distances(self._x[rows, :d], rows)
        self._pairs = (d, rows, dist)
        return dist

    def _mutate(self, x: np.ndarray, strength: float, mask: np.ndarray) -> np.ndarray:
        """``x`` with the genes in ``mask`` mutated.  Random numbers are drawn for every gene (the
        stream stays the same whatever the mask); the arithmetic is done for the masked ones."""
        return mutate(self._rng, x, strength, mask, self._kind, self._nval, self._sigma)

    def _mixing(self) -> bool:
        """Whether the value statistics pre-select the children (the first ``_mix_gens``
        generations; then the nearest-neighbour model alone, which avoids failing regions better
        once the elite has converged)."""
        return self._surrogate != "knn" and self._n < self._mix_gens * (self.population_size or 1)

    def _n_children(self) -> int:
        """Fresh children to compare: many while the value statistics pre-select them, else
        ``_knn_cands`` (the nearest-neighbour distances cost the most per candidate)."""
        return self._n_candidates if self._mixing() else min(self._n_candidates, self._knn_cands)

    def _pick(self, cands: np.ndarray, order: np.ndarray, checked: bool = False) -> int:
        """Index of the candidate to run, by the surrogate ``_surrogate`` (see its constant);
        ``checked``: every discrete gene of ``cands`` holds a table code (:meth:`_table_codes`)."""
        if not self._mixing():
            return int(np.argmin(self._knn_score(cands, order, checked=checked)))
        score = self._value_counts(order).score(cands)
        score = score + self._rng.uniform(0.0, 1e-6, len(score))
        if self._surrogate == "tpe":
            return int(np.argmin(score + self._fail_risk(cands)))
        if self._fail_weight:
            score = score + self._fail_weight * self._fail_risk(cands)
        top = np.argsort(score, kind="stable")[: self._knn_top]
        return int(top[np.argmin(self._knn_score(cands[top], order, checked=checked))])

    def _value_counts(self, order: np.ndarray) -> ValueCounts:
        """Value statistics of the best ``_gamma`` of the evaluated trials against the others
        (failures among the others), brought up to date with the trials added since last time."""
        n, d = self._n, len(self._names)
        counts = self._counts
        if counts is None or counts.rows is not self._x or counts.d != d or counts.n > n:
            counts = self._counts = ValueCounts(self._kind, self._nval, self._x, pair_weight=self._pair_weight)
        counts.update(self._x[counts.n : n, :d], order[: max(2, math.ceil(self._gamma * n))])
        return counts

    def _knn_score(self, cands: np.ndarray, order: np.ndarray, checked: bool = False) -> np.ndarray:
        """Score of each candidate (lower is better): the fitness rank of its nearest evaluated
        trials (failures worst) plus its failure risk; ``checked``: see :meth:`_pick`."""
        n = self._n
        lo = max(0, n - self._window)
        old = sorted(r for r in order[: self._survivors()].tolist() if r < lo)  # elite rows before the window
        idx = np.arange(lo - len(old), n)
        idx[: len(old)] = old
        dist = self._distances(cands, idx, len(old), checked)
        bad = self._badness(order).take(idx)  # the fitness rank in [0, 1), failures 1
        k = min(3, len(idx))
        if self._first_ties:
            near = _smallest(dist, k)
        else:
            near = np.argpartition(dist, k - 1, axis=1)[:, :k]
        w = 1.0 / (dist[np.arange(len(dist))[:, None], near] + 1e-3)
        score = (bad.take(near) * w).sum(axis=1) / w.sum(axis=1) + self._fail_risk(cands, checked)
        return score + self._rng.uniform(0.0, 1e-6, len(score))

    def _distances(
        self, cands: np.ndarray, idx: np.ndarray, run_from: int | None = None, checked: bool = False
    ) -> np.ndarray:
        """Distance of each candidate to each evaluated row in ``idx`` (sum of per-gene distances
        in [0, 1]; an absent gene against a present one counts 1; see ``_distance.direct``),
        from per-gene tables over the latest rows (:class:`RowDistances`); ``idx[run_from:]``:
        consecutive rows, if known; ``checked``: see :meth:`_pick`."""
        return self._row_distances(
            self._x, self._n, cands, idx, self._scale, self._nval, self._tabled, run_from, self._pairwise_sums, checked
        )

    def _fail_risk(self, cands: np.ndarray, checked: bool = False) -> np.ndarray:
        """Highest smoothed failure rate among the candidate's gene values (failures cluster on
        values such as too large blocks); the prior is the study's failure rate.  With
        ``_pair_fail``, also among its gene-value pairs (:meth:`ValueCounts.pair_risk`);
        ``checked``: see :meth:`_pick`."""
        risk = self._value_fail_risk(cands, checked)
        if self._pair_fail and self._n_failed and self._pair_fail_now():
            risk = np.maximum(risk, self._failure_counts().pair_risk(cands, self._n_failed / self._n))
        return risk

    def _pair_fail_now(self) -> bool:
        """Whether the pair failure rates count now: always, or (``_pair_fail_gens``) while fewer
        trials than that many generations finished (the early phase, where failures cost most)."""
        return not self._pair_fail_gens or self._n < self._pair_fail_gens * (self.population_size or 1)

    def _failure_counts(self) -> ValueCounts:
        """Value and value-pair counts with the failed rows as the counted "good" ones, brought up
        to date with the rows added since last time."""
        n, d = self._n, len(self._names)
        counts = self._fail_counts
        if counts is None or counts.rows is not self._x or counts.d != d or counts.n > n:
            counts = self._fail_counts = ValueCounts(self._kind, self._nval, self._x, pair_weight=1.0)
        if counts.n != n:
            counts.update(self._x[counts.n : n, :d], np.where(np.isnan(self._v[:n, 0]))[0])
        return counts

    def _value_fail_risk(self, cands: np.ndarray, checked: bool = False) -> np.ndarray:
        """The per-gene part of :meth:`_fail_risk` (``checked``: see :meth:`_pick`)."""
        if not self._n_failed or not self._fail_tab:
            return np.zeros(len(cands))
        if self._fail_stack[0] != len(self._fail_tab):  # a gene got its table since
            cols = np.array(sorted(self._fail_tab))
            width = max(t.shape[1] for t in self._fail_tab.values())
            stack = np.zeros((2, len(cols), width))
            for i, j in enumerate(cols):
                w = self._fail_tab[j].shape[1]
                stack[:, i, :w] = self._fail_tab[j]
                self._fail_tab[j] = stack[:, i, :w]  # a view: the counts of new rows land in the stack
            self._fail_stack = (len(self._fail_tab), cols, stack)
        _, cols, stack = self._fail_stack
        if self._fail_rates[0] != (self._n, stack.shape):  # per gene and value, 0 for absent (last)
            prior = self._n_failed / self._n
            if self._fail_rates[0] is None or self._fail_rates[0][1] != stack.shape:
                table = np.zeros((len(cols), stack.shape[2] + 1))  # its last column stays 0
                self._fail_rates = (None, table, table.ravel(), np.arange(len(cols)) * table.shape[1])
            _, table, flat, first = self._fail_rates
            np.divide(stack[0] + 2.0 * prior, stack[1] + 2.0, out=table[:, :-1])  # in place, once per trial
            self._fail_rates = ((self._n, stack.shape), table, flat, first)
        _, _, rates, first = self._fail_rates
        c = cands[:, cols] if len(cols) != cands.shape[1] else cands  # every gene: in column order
        width = stack.shape[2]
        # absent (NaN): the last column, of zeros; ``np.fmin`` gives it and keeps checked codes (below it)
        ci = (np.fmin(c, width) if checked else np.where(np.isnan(c), width, c)).astype(np.intp)
        if not checked and ci.view(np.uintp).max() > width:  # a code outside the tables (negative ones wrap round)
            ci = np.where(np.isnan(c), 0, c).astype(int)
            prior = self._n_failed / self._n
            rate = (stack[0, np.arange(len(cols)), ci] + 2.0 * prior) / (stack[1, np.arange(len(cols)), ci] + 2.0)
            rate[np.isnan(c)] = 0.0
            return np.maximum(rate.max(axis=1), 0.0)
        return rates[ci + first].max(axis=1)  # rates are >= 0: the floor at 0 changes nothing


class _Neighbourhood:
    """A genome's neighbourhood as local search keeps it (see ``GeneticSampler._neighbours``):
    the rows, which are not to be changed, and what is worked out from them once: their keys,
    their one-gene moves (:func:`pair_move_keys`) and the rows not finished at the last look
    (``GeneticSampler._kept_unseen``); ``drawn_at``: the number of finished trials when random
    re-draws were drawn (None: none were)."""

    __slots__ = ("rows", "keys", "drawn_at", "moves", "unseen")

    def __init__(self, rows: np.ndarray, drawn_at: int | None) -> None:
        self.rows, self.drawn_at = rows, drawn_at
        self.keys: list[bytes] | None = None
        self.moves: tuple[list[bytes], np.ndarray, np.ndarray] | None = None
        self.unseen: tuple[set[bytes], list[int]] | None = None


class _Taken:
    """Keys of configurations already in the study: finished ones and running/waiting ones."""

    __slots__ = ("finished", "running")

    def __init__(self, finished: set[bytes], running: set[bytes]) -> None:
        self.finished, self.running = finished, running

    def __contains__(self, key: bytes) -> bool:
        return key in self.finished or key in self.running


class _Activation:
    """What decides whether a parameter is suggested, learnt row by row (see
    ``GeneticSampler._learn_activation``): the same rules as a scan of every row, from evidence
    that only grows (bit masks over the ``d`` genes), so a row costs O(d) and a rule is worked out
    again only when its evidence changed.

    For gene ``j`` and an earlier gene ``q``, the rule ``(j, q, off)`` holds when ``j`` is present
    in some rows and absent in others, ``q`` is present wherever ``j`` is, and the values of ``q``
    where ``j`` is absent (``off``, not empty) never occur where ``j`` is present; the latest
    such ``q`` is taken.
    """

    __slots__ = ("d", "_full", "_present", "_absent", "_broken", "_values", "_dirty", "_rules")

    def __init__(self, d: int) -> None:
        self.d = d
        self._full = (1 << d) - 1
        self._present = 0  # genes present in some row
        self._absent = 0  # genes absent from some row
        self._broken = [0] * d  # [j]: genes q absent from some row where j is present
        # [q]: value of q -> [genes present in a row with that value, genes absent from one]
        self._values: list[dict[float, list[int]]] = [{} for _ in range(d)]
        self._dirty = 0  # genes whose rule must be worked out again
        self._rules: dict[int, tuple[int, int, np.ndarray]] = {}

    def add(self, row: np.ndarray) -> None:
        """Take one more genome (NaN: the gene is absent) into account."""
        self.add_list(row.tolist())

    def add_list(self, values: list[float]) -> None:
        """:meth:`add` for a genome given as a list."""
        columns = [j for j, v in enumerate(values) if v == v]
        on = 0
        for j in columns:
            on |= 1 << j
        off = self._full & ~on
        dirty = (on & ~self._present) | (off & ~self._absent)
        self._present |= on
        self._absent |= off
        broken = self._broken
        for j in columns:
            if off & ~broken[j]:
                broken[j] |= off
                dirty |= 1 << j
        for q in columns:
            seen = self._values[q].get(values[q])
            if seen is None:
                self._values[q][values[q]] = [on, off]
                dirty |= on | off
                continue
            if on & ~seen[0]:
                dirty |= on & ~seen[0]
                seen[0] |= on
            if off & ~seen[1]:
                dirty |= off & ~seen[1]
                seen[1] |= off
        self._dirty |= dirty

    def rules(self) -> list[tuple[int, int, np.ndarray]]:
        """The rules, in gene order."""
        partial = self._present & self._absent
        dirty, self._dirty = self._dirty, 0
        j = 0
        while dirty >> j:
            if dirty >> j & 1:
                self._rules.pop(j, None)
                if partial >> j & 1:
                    rule = self._rule(j)
                    if rule is not None:
                        self._rules[j] = rule
            j += 1
        return [self._rules[j] for j in sorted(self._rules)]

    def _rule(self, j: int) -> tuple[int, int, np.ndarray] | None:
        bit = 1 << j
        for q in range(j - 1, -1, -1):
            if self._broken[j] >> q & 1:
                continue
            on = set()
            off = []
            for value, (present, absent) in self._values[q].items():
                if present & bit:
                    on.add(value)
                if absent & bit:
                    off.append(value)
            if off and on.isdisjoint(off):
                return j, q, np.array(sorted(off), dtype=float)
        return None


_KINDS = {"ord": 0, "cat": 1, "cont": 2}
_MAX_TABLE = 4096
_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0  # spreads a share evenly over any run of trial numbers


def _unseen(keys: list[bytes], taken: _Taken, seen: set[bytes], as_run: list[bytes] | None = None) -> list[int]:
    """Indices of the candidates whose key is neither in the study (``taken``) nor met before
    (``seen``, which gets them); with ``as_run`` (the same candidates' keys as the objective will
    run them), that key must not be in the study either."""
    finished, running = taken.finished, taken.running
    free = [i for i, k in enumerate(keys) if k not in finished and k not in running]
    if as_run is not None:
        free = [i for i in free if as_run[i] not in finished and as_run[i] not in running]
    return _first_new(keys, free, seen)


def _first_new(keys: list[bytes], free: list[int], seen: set[bytes]) -> list[int]:
    """The indices ``free`` whose key is not in ``seen`` and not met before among them (``seen``
    gets their keys)."""
    new = []
    for i in free:
        k = keys[i]
        if k not in seen:
            seen.add(k)
            new.append(i)
    return new


def _key(codes: list[float]) -> bytes:
    """``_keys`` of one genome given as a list of integer codes (rounding changes nothing)."""
    return struct.pack(f"@{len(codes)}d", *[-1.0 if c != c else c for c in codes])


def _keys(codes: np.ndarray, integral: bool = False) -> list[bytes]:
    """Hashable identity of each genome row: the bytes of its codes, absent genes as -1, rounded
    to 9 decimals (``integral``: every code is an integer, so the rounding is left out)."""
    codes = np.where(np.isnan(codes), -1.0, codes)
    if not integral:
        codes = np.round(codes, 9) + 0.0  # + 0.0: -0.0 becomes 0.0, the same key
    m, d = codes.shape
    if not d:
        return [b""] * m
    return np.ascontiguousarray(codes).view(_row_dtype(d)).ravel().tolist()


@functools.lru_cache(maxsize=64)
def _row_dtype(d: int) -> np.dtype:
    """The dtype of one row of ``d`` float64 codes as raw bytes (made once per width: building a
    void dtype costs more than the view)."""
    return np.dtype((np.void, 8 * d))


def _smallest(dist: np.ndarray, k: int) -> np.ndarray:
    """Columns of the ``k`` smallest values of each row, smallest first, ties to the first
    column (``np.argsort(dist, kind="stable")[:, :k]``, by ``k`` argmin passes)."""
    left = dist.copy()
    rows = np.arange(len(dist))
    near = np.empty((len(dist), k), dtype=np.intp)
    for t in range(k):
        near[:, t] = j = left.argmin(axis=1)
        left[rows, j] = math.inf
    return near


def _crowding(v: np.ndarray) -> np.ndarray:
    """NSGA-II crowding distance of the points of one front."""
    n = len(v)
    if n <= 2:
        return np.full(n, math.inf)
    c = np.zeros(n)
    for j in range(v.shape[1]):
        o = np.argsort(v[:, j])
        span = v[o[-1], j] - v[o[0], j]
        c[o[0]] = c[o[-1]] = math.inf
        if span > 0:
            c[o[1:-1]] += (v[o[2:], j] - v[o[:-2], j]) / span
    return c
