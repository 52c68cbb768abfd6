"""Minimise x**2 + y (CompileIQ's single-objective example; only the imports changed)."""

import ciq_optuna.compileiq.search_spaces.base as ss
from ciq_optuna.compileiq.ciq import Search
from ciq_optuna.compileiq.types import ProblemType, SearchConfiguration


def objective_function(params):
    return params["x"] ** 2 + params["y"]


if __name__ == "__main__":
    search_space = {
        "x": ss.range(1.0, 20.0, 0.5),
        "y": ss.choice([1, 2, 3]),
        "z": ss.literal("this is a constant", knockout_prob=0.5),
    }
    search_config = SearchConfiguration(problem_type=ProblemType.MIN, generations=5)
    search = Search(
        objective_function=objective_function, search_space=search_space, search_config=search_config
    )
    result = search.start()
    print(result.get_results())
    print(result.get_best_result())
