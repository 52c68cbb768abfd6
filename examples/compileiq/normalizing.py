"""Scores normalised against a baseline measurement (CompileIQ's normalisation example; only the
imports changed). The objective receives ``BASELINE_CONFIG`` ({}) once, for the baseline."""

import ciq_optuna.compileiq.search_spaces.base as ss
from ciq_optuna.compileiq.ciq import Search
from ciq_optuna.compileiq.types import BASELINE_CONFIG, MultiProcessWorker, ProblemType, SearchConfiguration


def objective_function(params):
    if params == BASELINE_CONFIG:
        return 0.001
    return params["x"] ** 2 + params["y"]


if __name__ == "__main__":
    search_space = {
        "x": ss.range(1.0, 20.0, 0.5),
        "y": ss.choice([1, 2, 3]),
    }
    search_config = SearchConfiguration(
        problem_type=ProblemType.MIN, normalize=True, pool_size=12, generations=2
    )
    search = Search(
        objective_function=objective_function,
        search_space=search_space,
        search_config=search_config,
        worker_type=MultiProcessWorker,
    )
    result = search.start(num_workers=5)
    # The baseline row has params == {} and norm_score_1 == 1.0.
    print(result.get_results())
