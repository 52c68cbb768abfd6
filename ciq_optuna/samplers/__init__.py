"""Samplers of ciq-optuna: GeneticSampler for one objective, NSGA-II for several."""

from ciq_optuna.samplers._factory import make_sampler, pareto_front_dataframe, pareto_front_trials
from ciq_optuna.samplers._genetic import GeneticSampler

__all__ = ["GeneticSampler", "make_sampler", "pareto_front_dataframe", "pareto_front_trials"]
