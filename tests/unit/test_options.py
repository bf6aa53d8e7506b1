"""Options: one object checks a value and says what it accepts; JSON is read strictly."""

from __future__ import annotations

import pytest

from loomdb.errors import LoomOptionError
from loomdb.functions.train_options import TRAIN
from loomdb.functions.train_plan import plan
from loomdb.options import AnyOf, Choices, Interval, parse_json
from loomdb.store import layout


def test_constraints_describe_what_they_check():
    assert Interval(True, 1, 32).describe() == "an integer from 1 to 32"
    assert Interval(False, 0, low_open=True).describe() == "a number > 0"
    assert Choices(["a", "b", "c"]).describe() == "'a', 'b' or 'c'"
    assert not Interval(False, 0).check(float("inf"))
    assert not Interval(False, 0).check(float("nan"))
    assert not Interval(True, 0).check(True)
    either = AnyOf(Interval(True, 1, 32), Choices(["adaptive"]))
    assert either.check(4) and either.check("adaptive") and not either.check(0)


def test_choices_come_from_the_registries():
    model = TRAIN.by_name["model"].constraint
    assert isinstance(model, Choices) and set(model.values) == {"linear", "logistic", "svm"}
    backend = TRAIN.by_name["backend"].constraint
    assert {"cpu", "fpga-sim", "gpu"} <= set(backend.values)  # type: ignore[attr-defined]


def test_option_validation_messages():
    with pytest.raises(LoomOptionError, match="unknown loom_train option 'lr_shedule'") as e:
        TRAIN.parse({"lr_shedule": "constant"})
    assert "lr_schedule" in (e.value.hint or "")
    with pytest.raises(LoomOptionError, match="'l2' option must be a number >= 0; got -1"):
        TRAIN.parse({"l2": -1})
    with pytest.raises(LoomOptionError, match="'fit_intercept' option must be true or false"):
        TRAIN.parse({"fit_intercept": 1})
    opts = TRAIN.parse({"lr": 1})
    assert opts["lr"] == 1.0 and opts["model"] == "logistic" and opts["lr"] is not 1  # noqa: F632


@pytest.mark.parametrize(
    "text, match",
    [
        ("[1, 2]", "JSON object"),
        ('{"l2": Infinity}', "may not hold Infinity"),
        ('{"lr": NaN}', "may not hold NaN"),
        ("[" * 100000 + "]" * 100000, "nested more than"),
        ('{"a": ' * 20 + "1" + "}" * 20, "nested more than"),
        ("not json", "could not parse"),
    ],
)
def test_json_is_read_strictly(text, match):
    with pytest.raises(LoomOptionError, match=match) as info:
        parse_json(text)
    assert info.value.hint  # '[1, 2]' had none: PostgreSQL's ERROR came without a HINT


@pytest.mark.parametrize("text", ['"epochs"', "7", "null", "true", "[]"])
def test_options_that_are_no_object_say_what_one_looks_like(text):
    with pytest.raises(LoomOptionError, match="must be a JSON object") as info:
        parse_json(text)
    assert '{"model": "logistic", "epochs": 10}' in (info.value.hint or "")
    with pytest.raises(LoomOptionError, match="too long") as info:
        parse_json("{" + " " * (1 << 21) + "}")
    assert info.value.hint


def test_huge_numbers_are_refused_by_their_bounds():
    with pytest.raises(LoomOptionError, match="'seed' option must be an integer from 0"):
        (TRAIN + layout.OPTIONS).parse({"seed": 10**30})
    with pytest.raises(LoomOptionError, match="'lr' option must be a number > 0"):
        TRAIN.parse({"lr": 0})


def test_lr_decay_is_refused_where_the_schedule_is_constant():
    with pytest.raises(LoomOptionError, match="schedule is constant .the default") as e:
        plan({"lr_decay": 0.9})  # the automatic step's schedule
    assert '"lr_schedule": "inverse-t"' in (e.value.hint or "")
    with pytest.raises(LoomOptionError, match=r"schedule is constant \(hint"):
        plan({"lr_decay": 0.9, "lr_schedule": "constant", "lr": 0.1})
    assert plan({"lr_decay": 0.5, "lr_schedule": "exponential"}).lr_decay == 0.5
    given_lr = plan({"lr_decay": 0.5, "lr": 0.1})  # a given lr decays inverse-t by default
    assert (given_lr.lr_schedule, given_lr.lr_decay) == ("inverse-t", 0.5)
    assert plan({"lr_decay": 3.0, "lr": 0.1}).lr_decay == 3.0  # inverse-t: lr / (1 + 3t)


@pytest.mark.parametrize("decay", [0, 1, 1.5])
def test_an_exponential_schedule_decays_by_a_factor_below_1(decay):
    """lr·decay^epoch: 0 stopped training after the first epoch, above 1 the step grew."""
    with pytest.raises(LoomOptionError, match="must be above 0 and below 1"):
        plan({"lr_decay": decay, "lr_schedule": "exponential"})
