"""Two objectives, (x**2 + y, y**2 + x), both minimised; prints the Pareto front
(CompileIQ's multi-objective example; only the imports changed)."""

import ciq_optuna.compileiq.search_spaces.base as ss
from ciq_optuna.compileiq.ciq import Search
from ciq_optuna.compileiq.types import ProblemType, SearchConfiguration


def objective_function(params):
    x, y = params["x"], params["y"]
    return x**2 + y, y**2 + x


if __name__ == "__main__":
    search_space = {
        "x": ss.range(-10.0, 10.0, 0.5),
        "y": ss.range(-10.0, 10.0, 0.5),
    }
    search_config = SearchConfiguration(
        problem_type=ProblemType.MIN,
        num_objectives=2,
        pool_size=12,
        generations=3,
        mutate_rate=0.5,
    )
    search = Search(
        objective_function=objective_function, search_space=search_space, search_config=search_config
    )
    result = search.start(num_workers=2)
    print(result.get_results())
    for row in result.pareto_front():
        print(row)
