"""A four-level nested search space; the objective branches on the knocked-out literal ``z``
(CompileIQ's nested example; only the imports changed)."""

import ciq_optuna.compileiq.search_spaces.base as ss
from ciq_optuna.compileiq.ciq import Search
from ciq_optuna.compileiq.types import ProblemType, SearchConfiguration


def objective_function(params):
    a = params["level_1"]["level_2"]["level_3"]["a"]
    b = params["level_1"]["level_2"]["b"]
    c = params["level_1"]["c"]
    if params.get("z") is not None:
        return a**2 + b + c
    return a**2 + 2 * b + c


if __name__ == "__main__":
    search_space = {
        "level_1": {
            "level_2": {
                "level_3": {"a": ss.range(-5, 5, 1)},
                "b": ss.choice([1, 2, 3]),
            },
            "c": ss.log_sampling(0.001, 1.0, total=4),
        },
        "z": ss.literal("knock me out", knockout_prob=0.5),
    }
    search_config = SearchConfiguration(problem_type=ProblemType.MIN, pool_size=32, generations=3)
    search = Search(
        objective_function=objective_function, search_space=search_space, search_config=search_config
    )
    result = search.start()
    print(result.get_results())
    print(result.get_best_result())
