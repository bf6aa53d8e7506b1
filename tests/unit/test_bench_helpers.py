"""The train benchmark's pure helpers: the search for the fewest steps, the objective, the race
and the binary COPY parser (no database, no timing asserted)."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from loomdb.bench.epochwise import race
from loomdb.bench.fetch import SIGNATURE, parse_copy_binary
from loomdb.bench.objective import Objective, to_raw
from loomdb.bench.search import fewest_steps, interpolate


def _power_law(k: int) -> float:
    return 1.0 + 3.0 / k**0.7  # a first-order method's gap; optimum 1


@pytest.mark.parametrize("floor", [None, 1.0])
@pytest.mark.parametrize("target", [1.9, 1.05, 1.01, 1.001])
def test_fewest_steps_finds_the_first_k_that_meets_the_target(floor, target):
    cap = 5000
    truth = next((k for k in range(1, cap + 1) if _power_law(k) <= target), None)
    found = fewest_steps(_power_law, target, cap, floor)
    assert found.k == truth
    if truth is not None:
        assert found.probes[truth] <= target
        assert truth == 1 or found.probes[truth - 1] > target


def test_interpolation_needs_fewer_probes_than_bisection():
    plain = fewest_steps(_power_law, 1.01, 5000)
    guided = fewest_steps(_power_law, 1.01, 5000, floor=1.0)
    assert guided.k == plain.k
    assert len(guided.probes) < len(plain.probes)


def test_not_met_within_the_cap_reports_the_best_probe():
    found = fewest_steps(_power_law, 1.0, 100, floor=1.0)
    assert found.k is None
    assert found.best == pytest.approx(_power_law(100))
    assert max(found.probes) == 100


def test_interpolate_stays_inside_the_bracket_and_declines_bad_values():
    assert interpolate(10, 20, 1.5, 1.2, 1.3, 1.0) in range(11, 20)
    assert interpolate(10, 20, 1.2, 1.5, 1.3, 1.0) is None  # rose instead of falling
    assert interpolate(10, 20, 1.5, 1.2, 1.3, 1.3) is None  # target at the floor


def test_objective_is_the_same_from_raw_and_zscored_weights():
    rng = np.random.default_rng(1)
    X = rng.normal(3.0, 2.0, size=(200, 4))
    X[:, 2] = 7.0  # a constant column keeps scale 1
    y = (X[:, 0] + rng.normal(size=200) > 3).astype(float)
    obj = Objective(X, y, l2=0.1)
    v, c = np.array([0.5, -1.0, 0.25, 2.0]), 0.3
    Z = obj.zscored()
    z = Z @ v + c
    expected = np.mean(np.log1p(np.exp(z)) - y * z) + 0.05 * float(v @ v)
    assert obj.of_zscored(v, c) == pytest.approx(expected)
    w, b = to_raw(v, c, obj.mean, obj.std)
    assert obj(w, b) == pytest.approx(expected)
    assert np.allclose(X @ w + b, z)


def test_race_stops_at_the_target_on_a_plateau_or_at_the_cap():
    values = iter([5.0, 4.0, 3.0, 2.0, 1.0])
    met = race(lambda: None, lambda: next(values), 2.5, 10)
    assert (met.epochs, met.why, met.best) == (4, "met", 2.0)
    assert met.seconds == met.spent >= 0
    flat = race(lambda: None, lambda: 2.0, 1.0, 100, patience=4)
    assert (flat.epochs, flat.seconds, flat.why, flat.ran) == (None, None, "plateau", 5)
    capped = race(lambda: None, lambda: 2.0, 1.0, 7)
    assert (capped.why, capped.ran) == ("cap", 7)


def _copy_binary(rows: np.ndarray) -> bytes:
    out = [SIGNATURE, struct.pack(">ii", 0, 0)]
    for row in rows:
        out.append(struct.pack(">h", len(row)))
        out += [struct.pack(">id", 8, float(v)) for v in row]
    return b"".join(out + [struct.pack(">h", -1)])


def test_parse_copy_binary_round_trips_float8_rows():
    rows = np.array([[1.5, -2.0, 0.0], [np.pi, 1e300, -0.0]])
    assert np.array_equal(parse_copy_binary(_copy_binary(rows), 3), rows)
    assert parse_copy_binary(_copy_binary(np.empty((0, 2))), 2).shape == (0, 2)


def test_parse_copy_binary_refuses_what_it_cannot_read():
    good = _copy_binary(np.ones((2, 2)))
    with pytest.raises(ValueError):
        parse_copy_binary(b"nope" + good, 2)
    with pytest.raises(ValueError):
        parse_copy_binary(good, 3)
    null = good.replace(struct.pack(">id", 8, 1.0), struct.pack(">i", -1) + b"\0" * 8, 1)
    with pytest.raises(ValueError):
        parse_copy_binary(null, 2)


def test_bench_json_writes_na_as_null():
    import json

    from loomdb.bench.table import BenchTable, dumps

    table = BenchTable("t", ["a", "b", "c"])
    table.add(1.5, float("nan"), "not reached")
    assert json.loads(dumps([table]))[0]["rows"] == [[1.5, None, "not reached"]]
    assert table.render().splitlines()[-1].split("|")[2].strip() == "n/a"


def test_bench_table_shows_the_significant_digits_asked_for():
    from loomdb.bench.table import BenchTable

    table = BenchTable("t", ["s", "r"], digits={"s": 3, "r": 5})
    table.add(0.013456, 1.0099123)
    table.add(158.04, 1.0)
    rows = [line.split("|")[1:3] for line in table.render().splitlines()[4:6]]
    assert [[c.strip() for c in r] for r in rows] == [["0.0135", "1.0099"], ["158", "1.0000"]]


@pytest.mark.parametrize("optimizer", ["nesterov", "sgd", "adam"])
def test_the_numpy_floor_is_the_trainers_algorithm(optimizer):
    """Same rows in the same order, same options: the floor's model after k epochs is the
    trainer's k-epoch model (a short last batch, per-epoch hooks and the model iterate included)."""
    from loomdb.accel.cpu import CpuBackend
    from loomdb.bench.floor import sgd_epochs
    from loomdb.learn.trainer import TrainConfig, fit
    from support.arrays import ArraySource, problem

    rng = np.random.default_rng(3)
    X = rng.normal(2.0, 3.0, size=(203, 5))
    y = (X @ rng.normal(size=5) + rng.normal(size=203) > 4).astype(float)
    used = {
        "lr": 0.05,
        "lr_schedule": "constant",
        "lr_decay": 0.0,
        "optimizer": optimizer,
        "batch_size": 32,
        "l1": 0.0,
        "l2": 1e-3,
        "fit_intercept": True,
    }
    obj = Objective(X, y, l2=used["l2"])
    step, model = sgd_epochs(obj.zscored(), y, used, order=np.arange(len(y)))
    for _ in range(7):
        step()
    p = problem(X, [0.0, 1.0])
    config = TrainConfig(
        kind="logistic",
        epochs=7,
        lr=0.05,
        lr_schedule="constant",
        optimizer=optimizer,
        l2=used["l2"],
    )
    trained, _ = fit(ArraySource(X, y, 32), p, config, CpuBackend())
    v, c = model()
    np.testing.assert_allclose(v, trained.W[:, 0], rtol=1e-7, atol=1e-10)
    assert c == pytest.approx(float(trained.b[0]), rel=1e-7, abs=1e-10)


def test_bench_options_are_refused_where_a_suite_cannot_honour_them():
    from loomdb.bench import scale
    from loomdb.cli.bench import run_suite, sizes
    from loomdb.errors import LoomOptionError

    assert sizes("1000000,1e8") == [1_000_000, 100_000_000]
    with pytest.raises(LoomOptionError, match="--formats is for bench scale"):
        run_suite("toc", quick=True, json_path=None, dsn=None, formats="dense")
    with pytest.raises(LoomOptionError, match="--rows is for bench scale"):
        run_suite("toc", quick=True, json_path=None, dsn=None, rows="1000")
    for wrong in (["dense", "csv"], []):
        with pytest.raises(LoomOptionError, match="bench scale lays out dense, toc, mlweaving"):
            scale.run(formats=wrong)


def test_bench_arguments_are_checked_before_the_suite_runs(monkeypatch, tmp_path):
    """A wrong --rows, --dsn or --json is a LoomError up front, not a traceback after a run."""
    from loomdb.bench import sim, toc
    from loomdb.cli.bench import run_suite, sizes
    from loomdb.errors import LoomDatabaseError, LoomNotFoundError, LoomOptionError

    def ran(quick: bool = False, dsn: str | None = None):
        raise AssertionError("the suite ran")

    monkeypatch.setattr(toc, "run", ran)
    monkeypatch.setattr(sim, "run", lambda quick=False: ran())
    for wrong in ("1000,,2000", "inf", "nan", "1e3.5", "999", "1000.5", ""):
        with pytest.raises(LoomOptionError, match="--rows takes whole row counts"):
            sizes(wrong)
    with pytest.raises(LoomOptionError, match="bench sim does not compare engines"):
        run_suite("sim", quick=True, json_path=None, dsn="host=127.0.0.1 port=1")
    with pytest.raises(LoomDatabaseError, match="could not connect to PostgreSQL") as e:
        run_suite("toc", quick=True, json_path=None, dsn="host=127.0.0.1 port=1")
    assert "--dsn" in (e.value.hint or "")
    for where, problem in [(tmp_path / "nosuch" / "r.json", "there is no folder"), (tmp_path, "")]:
        with pytest.raises(LoomNotFoundError, match=f"cannot write --json .*{problem}"):
            run_suite("toc", quick=True, json_path=str(where), dsn=None)


class _FakePg:
    """A psycopg connection that records each statement; the extension is in ``my ext``."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.description: list[str] | None = None
        self.answer: list[tuple] = []

    def cursor(self) -> _FakePg:
        return self

    def __enter__(self) -> _FakePg:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def execute(self, sql: str, params: object = None) -> _FakePg:
        self.sent.append(sql)
        schema = "pg_catalog.pg_extension" in sql
        count = sql.startswith("SELECT count(*)")
        self.answer = [("my ext",)] if schema else [(1,)] if count else [("{}",)]
        self.description = ["column"] if sql.lstrip().upper().startswith("SELECT") else None
        return self

    def fetchall(self) -> list[tuple]:
        return self.answer

    def close(self) -> None:
        pass


def test_the_bench_names_the_extensions_schema_in_every_postgresql_call(monkeypatch):
    """loomdb bench called loom_* by bare name on PostgreSQL, where a function of the same
    signature another role made earlier on the search_path would be the one run; loomdb's
    other clients name the extension's schema."""
    import re

    import psycopg

    from loomdb.bench import loom_runs
    from loomdb.bench.engines import engines

    fake = _FakePg()
    monkeypatch.setattr(psycopg, "connect", lambda *a, **k: fake)
    with engines("host=nowhere") as found:
        pg = found[-1]
        assert pg.name == "postgres" and pg.loom == '"my ext".'
        loom_runs.create_index(pg, "bench_ix", "t", "y", format="toc")
    calls = [c for sql in fake.sent for c in re.findall(r'((?:"[^"]*"\.)?)loom_[a-z_]+\(', sql)]
    assert len(calls) == 2 and set(calls) == {'"my ext".'}, fake.sent
    assert found[0].loom == ""  # DuckDB: loomdb's functions are the connection's own
