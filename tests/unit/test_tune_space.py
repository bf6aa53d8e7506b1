"""loom_tune's search space without a database: the grid, the seeded draw, the refusals."""

from __future__ import annotations

import itertools

import pytest

from loomdb.errors import LoomOptionError
from loomdb.functions.tune_space import MAX_TRIALS, space


def test_the_grid_is_every_combination_once_in_order():
    s = space({"lr": [0.1, 0.2, 0.3], "l2": [0, 1], "epochs": 3})
    drawn = [(d["lr"], d["l2"]) for d in s.draws()]
    assert drawn == list(itertools.product([0.1, 0.2, 0.3], [0, 1]))
    assert s.fixed == {"epochs": 3, "validation_fraction": 0.2}


def test_a_random_draw_is_distinct_seeded_and_within_the_lists():
    given = {"lr": [0.1, 0.2, 0.3, 0.4], "l2": [0, 1, 2], "search": "random", "trials": 6}
    first = space({**given, "search_seed": 5}).draws()
    assert first == space({**given, "search_seed": 5}).draws()
    picks = {(d["lr"], d["l2"]) for d in first}
    assert len(picks) == 6 and picks <= set(itertools.product(given["lr"], given["l2"]))
    assert len(space({**given, "trials": 50}).draws()) == 12  # the whole grid, no more


@pytest.mark.parametrize(
    "given, match",
    [
        ({"model": ["linear", "svm"]}, "'model' cannot be a list"),
        ({"lr": [[0.1]]}, "single values"),
        ({"search": "random"}, "needs 'trials'"),
        ({"lr": list(range(1, MAX_TRIALS + 2))}, f"runs at most {MAX_TRIALS}"),
        ({"search_seed": -1}, "'search_seed' option must be"),
    ],
)
def test_refusals(given, match):
    with pytest.raises(LoomOptionError, match=match):
        space(given)
