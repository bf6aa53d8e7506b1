"""DoppioDB's MLWeaving statements (MLWeaving paper §3), rewritten to loomdb's functions.

::

    CREATE INDEX i ON create_mlweaving('t1' [, 'label'])
    →  SELECT loom_create_index('i', 't1', 'label', '{"format": "mlweaving"}')

    CREATE INDEX m ON train_mlweaving('t1', epochs [, precision [, lr]])
    →  SELECT loom_train('m', 't1', NULL,
                         '{"index": "<t1's mlweaving index>", "model": "linear", "epochs": …}')

    SELECT * FROM infer_mlweaving(m, 't1' [, label_index])
    →  SELECT *, loom_predict('m', [f1, f2, …]) AS prediction FROM t1
                                   -- psql: CAST(ARRAY[…] AS DOUBLE PRECISION[])

Where loomdb departs from DoppioDB, and why:

* DoppioDB names the label only at inference (``label_index``); loomdb stores the label with the
  index, so ``create_mlweaving`` takes it as an optional second argument and otherwise asks the
  catalog for the table's default label (its last column).  ``label_index`` is accepted and
  ignored: the model knows its features.
* ``train_mlweaving``'s positional arguments follow the accelerator's job descriptor: the number
  of epochs, then the precision in bits (1–32, or ``'adaptive'``), then the step size ``lr``.  The
  model is least squares (``"linear"``), as the paper trains; the label argument of
  ``loom_train`` is NULL, meaning the index's label.  The index is the newest mlweaving index on
  the table; without one, LoomNotFoundError says to create it.
* ``infer_mlweaving`` may appear anywhere a table may: it becomes a subquery that adds the
  ``prediction`` column, named as PostgreSQL names a function in FROM (by the function, unless
  aliased): ``… FROM (SELECT *, loom_predict(…) AS prediction FROM t1) AS infer_mlweaving``;
  a bare ``SELECT * FROM infer_mlweaving(…)``, at the top or nested, becomes the flat query
  (unless its alias renames columns, ``AS p(a, b)``).  ``TABLESAMPLE`` samples the table's rows;
  what else a table may be written with (``ONLY``, ``WITH ORDINALITY``) is refused.
* Only that clause's text is replaced (``_splice``); the rest of the statement, alias and
  sample included, reaches the engine as written.  sqlglot's regenerated statement altered what
  it does not carry through: PostgreSQL's prefix ``@ a`` became ``$a``, a DuckDB sample's
  spelling changed.
"""

from __future__ import annotations

import json
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.tokens import Token, TokenType

from loomdb.errors import LoomNotFoundError, LoomStateError, LoomSyntaxError
from loomdb.frontend.calls import (
    fold_names,
    literal_value,
    loom_call,
    loom_function,
    string_value,
)
from loomdb.frontend.catalog import Catalog
from loomdb.frontend.create_index import create_properties

CREATE, TRAIN, INFER = "create_mlweaving", "train_mlweaving", "infer_mlweaving"
TRAIN_ARGUMENTS = ("epochs", "precision", "lr")
FORMS = {
    CREATE: f"CREATE INDEX name ON {CREATE}('table' [, 'label'])",
    TRAIN: f"CREATE INDEX model ON {TRAIN}('table', epochs [, precision [, lr]])",
    INFER: f"SELECT * FROM {INFER}(model, 'table' [, label_index])",
}


def doppio_function(tree: exp.Create) -> str | None:
    """``create_mlweaving`` or ``train_mlweaving`` when ``tree`` is ``CREATE INDEX … ON f(…)``."""
    index = tree.this
    if not isinstance(index, exp.Index):
        return None
    table, params = index.args.get("table"), index.args.get("params")
    if not isinstance(table, exp.Table) or table.db or params is None:
        return None
    name = table.name.lower()
    return name if name in (CREATE, TRAIN) and params.args.get("using") is None else None


def _need(catalog: Catalog | None, function: str) -> Catalog:
    if catalog is None:
        raise LoomStateError(
            f"{function} needs the database's catalog to look indexes and models up",
            hint="run it through loomdb.connect() or loomdb sql, which pass one",
        )
    return catalog


def _arguments(tree: exp.Create, function: str) -> list[exp.Expression]:
    index = tree.this
    params = index.args["params"]
    extra = [k for k, v in params.args.items() if v and k != "columns"]
    flags = [k for k in ("unique", "concurrently", "replace") if tree.args.get(k)]
    if create_properties(tree):
        flags.append("properties")
    if function == TRAIN and tree.args.get("exists"):
        flags.append("IF NOT EXISTS")
    if extra or flags or not index.name:
        raise LoomSyntaxError(
            f"CREATE INDEX … ON {function}(…) takes a name and the arguments only",
            hint=f"write {FORMS[function]}",
        )
    args = list(params.args.get("columns") or [])
    most = 2 if function == CREATE else 1 + len(TRAIN_ARGUMENTS)
    if not 1 <= len(args) <= most:
        raise LoomSyntaxError(
            f"{function} takes 1 to {most} arguments; got {len(args)}",
            hint=f"write {FORMS[function]}",
        )
    return args


def doppio_call(tree: exp.Create, function: str, dialect: str, catalog: Catalog | None) -> str:
    """The ``loom_create_index`` or ``loom_train`` call for DoppioDB's CREATE INDEX forms."""
    name = tree.this.name
    args = _arguments(tree, function)
    table = string_value(args[0], f"{function}'s table")
    if function == CREATE:
        label = (
            string_value(args[1], f"{function}'s label")
            if len(args) > 1
            else _need(catalog, function).default_label(table)
        )
        options: dict[str, Any] = {"format": "mlweaving"}
        if tree.args.get("exists"):
            options["if_not_exists"] = True
        return loom_call(
            "loom_create_index",
            name,
            table,
            label,
            json.dumps(options),
            dialect=dialect,
            catalog=catalog,
        )
    index = _need(catalog, function).index_for(table, "mlweaving")
    if index is None:
        raise LoomNotFoundError(
            f"{function}('{table}', …): table {table} has no mlweaving index",
            hint=f"create one first: CREATE INDEX … ON {CREATE}('{table}')",
        )
    options = {"index": index, "model": "linear"}
    for key, node in zip(TRAIN_ARGUMENTS, args[1:]):
        options[key] = literal_value(node, f"{function}'s {key}")
    return loom_call(
        "loom_train", name, table, None, json.dumps(options), dialect=dialect, catalog=catalog
    )


def _source_table(text: str, dialect: str) -> exp.Table:
    try:
        table = sqlglot.parse_one(text, into=exp.Table, read=dialect)
    except sqlglot.errors.SqlglotError:  # tokenizer and parser errors alike
        table = None
    if (
        not isinstance(table, exp.Table)
        or table.alias
        or not isinstance(table.this, exp.Identifier)
    ):
        raise LoomSyntaxError(
            f"{INFER}'s table must be a table name; got {text!r}", hint=f"write {FORMS[INFER]}"
        )
    return table


def _predicting_select(call: exp.Anonymous, dialect: str, catalog: Catalog | None) -> exp.Select:
    """``SELECT *, loom_predict('m', [f…]) AS prediction FROM t`` for ``infer_mlweaving(…)``."""
    args = call.expressions
    if not 2 <= len(args) <= 3:
        raise LoomSyntaxError(
            f"{INFER} takes 2 or 3 arguments; got {len(args)}", hint=f"write {FORMS[INFER]}"
        )
    model = string_value(args[0], f"{INFER}'s model")
    text = string_value(args[1], f"{INFER}'s table")
    table = _source_table(text, dialect)
    features = _need(catalog, INFER).model_features(model)
    # a table that cannot be read: loomdb's error, a hint
    _refuse_missing_features(model, text, features, _need(catalog, INFER).columns(text), dialect)
    row: exp.Expression = exp.Array(expressions=[exp.column(f, quoted=True) for f in features])
    if dialect == "postgres":  # loom_predict's own type: ARRAY[integer columns] is integer[],
        # for which a loom_predict(text, integer[]) another role made beside the extension's
        # (where others may create: public on PostgreSQL 14) would be the better match
        row = exp.cast(row, exp.DataType.build("DOUBLE PRECISION[]", dialect=dialect))
    predict = loom_function("loom_predict", [exp.Literal.string(model), row], catalog)
    return exp.select(exp.Star(), exp.alias_(predict, "prediction")).from_(table)


def _refuse_missing_features(
    model: str, table: str, features: list[str], columns: list[str], dialect: str
) -> None:
    """Refuse a table that lacks one of the model's feature columns (dropped or renamed since
    it was trained): the predicting query names them, and the engine's binder error would
    name a column the statement never wrote.  Names compared as the engine compares them
    (DuckDB ignores case; PostgreSQL's quoted names do not)."""

    def fold(name: str) -> str:
        return name.lower() if dialect == "duckdb" else name

    present = {fold(c) for c in columns}
    missing = [f for f in features if fold(f) not in present]
    if missing:
        raise LoomNotFoundError(
            f"{INFER}: model '{model}''s feature(s) "
            f"{', '.join(repr(f) for f in missing)} are not columns of {table}",
            hint=f"infer on a table with the model's features ({', '.join(features)}), or "
            "train the model again with loom_train on the columns the table has now",
        )


def _refuse_table_clauses(call: exp.Table) -> None:
    """Refuse what ``infer_mlweaving(…)`` is written with that a table function cannot take
    (``ONLY``, ``WITH ORDINALITY``…); a ``TABLESAMPLE`` samples its table's rows."""
    extra = [k for k, v in call.args.items() if v and k not in ("this", "alias", "sample")]
    if extra:
        raise LoomSyntaxError(
            f"{INFER} takes no {extra[0].upper().replace('_', ' ')}",
            hint=f"write {FORMS[INFER]}",
        )


def _is_bare(select: Any) -> bool:
    """Whether ``select`` is ``SELECT * FROM x`` and nothing else."""
    if not isinstance(select, exp.Select):
        return False
    rest = [k for k, v in select.args.items() if v and k not in ("expressions", "from", "from_")]
    stars = select.expressions
    return not rest and len(stars) == 1 and isinstance(stars[0], exp.Star)


def _bare_select_star(table: exp.Table) -> exp.Select | None:
    """The ``SELECT * FROM table`` (and nothing else) that ``table`` is the source of, if any:
    a table whose alias renames columns (``AS p(a, b)``) is no bare source."""
    alias = table.args.get("alias")
    if alias is not None and alias.columns:
        return None
    from_ = table.parent
    select = from_.parent if isinstance(from_, exp.From) else None
    return select if isinstance(select, exp.Select) and _is_bare(select) else None


# tokens after infer_mlweaving(…)'s closing parenthesis that may still be its clause: an alias
# with its columns, a sample (a longer one is not looked for)
_CLAUSE_TOKENS = 256


def _reads_as(piece: str, call: exp.Table, dialect: str) -> bool:
    """Whether ``SELECT * FROM piece`` is that and only that, its table clause ``call``."""
    try:
        read = sqlglot.parse_one(f"SELECT * FROM {piece}", read=dialect)
    except sqlglot.errors.SqlglotError:
        return False
    return _is_bare(read) and fold_names(read.args["from_"].this, [], dialect) == call


def _clause_end(
    call: exp.Table, text: str, tokens: list[Token], span: tuple[int, int], dialect: str
) -> int:
    """The index of the last token of the table clause ``call`` (``infer_mlweaving(…)``, its
    alias, its sample), whose call takes ``tokens[first : close + 1]``: the longest run of
    tokens, within its parentheses and before a comma there, that sqlglot reads as that very
    clause (a shorter one may read so too: DuckDB's ``TABLESAMPLE 10`` is ``… 10 ROWS``)."""
    (first, close), found, depth = span, None, 0
    for last in range(close, min(len(tokens), close + _CLAUSE_TOKENS)):
        kind = tokens[last].token_type
        if last > close:
            depth += (kind == TokenType.L_PAREN) - (kind == TokenType.R_PAREN)
        if depth < 0 or (depth == 0 and kind in (TokenType.COMMA, TokenType.SEMICOLON)):
            break
        piece = text[tokens[first].start : tokens[last].end + 1]
        if depth == 0 and _reads_as(piece, call, dialect):
            found = last
    if found is None:
        raise LoomSyntaxError(
            f"cannot tell where {INFER}(…) ends in {text[:80]!r}", hint=f"write {FORMS[INFER]}"
        )
    return found


def _sample_start(tokens: list[Token], after: int, last: int) -> int:
    """The index of the token that begins a sample clause (``TABLESAMPLE``, DuckDB's ``USING
    SAMPLE``) among ``tokens[after + 1 : last + 1]``, or ``last + 1`` when there is none."""
    for i in range(after + 1, last + 1):
        kind, following = tokens[i].token_type, tokens[i + 1].text.upper() if i < last else ""
        if kind == TokenType.TABLE_SAMPLE or (kind == TokenType.USING and following == "SAMPLE"):
            return i
    return last + 1


_SELECT_STAR_FROM = [TokenType.SELECT, TokenType.STAR, TokenType.FROM]


def _splice(
    call: exp.Table, text: str, tokens: list[Token], dialect: str, catalog: Catalog | None
) -> tuple[int, int, str]:
    """``(start, end, replacement)``: the span of ``text`` the call's clause (or the bare
    ``SELECT * FROM`` it is all of) takes, and the predicting query to write there, with the
    alias and sample as written."""
    where = call.this.meta.get("start")
    first = next((i for i, t in enumerate(tokens) if t.start == where), None)
    if first is None:
        raise LoomSyntaxError(
            f"cannot tell where {INFER}(…) begins in {text[:80]!r}", hint=f"write {FORMS[INFER]}"
        )
    close = _matching_paren(tokens, first + 1)
    last = _clause_end(call, text, tokens, (first, close), dialect)
    sample = _sample_start(tokens, close, last)
    query = _predicting_select(call.this, dialect, catalog).sql(
        dialect=dialect, normalize_functions=False
    )
    if sample <= last:
        query += " " + text[tokens[sample].start : tokens[last].end + 1]
    kinds = [t.token_type for t in tokens[max(first - 3, 0) : first]]
    if _bare_select_star(call) is not None and kinds == _SELECT_STAR_FROM:
        return tokens[first - 3].start, tokens[last].end + 1, query
    alias = text[tokens[close + 1].start : tokens[sample - 1].end + 1] if sample > close + 1 else ""
    return tokens[first].start, tokens[last].end + 1, f"({query}) {alias or 'AS ' + INFER}"


def _matching_paren(tokens: list[Token], opening: int) -> int:
    depth = 0
    for i in range(opening, len(tokens)):
        depth += (tokens[i].token_type == TokenType.L_PAREN) - (
            tokens[i].token_type == TokenType.R_PAREN
        )
        if depth == 0:
            return i
    return len(tokens) - 1


def infer_query(
    tree: exp.Expression, statement: str, tokens: list[Token], dialect: str, catalog: Catalog | None
) -> str:
    """``statement`` with every ``infer_mlweaving(…)`` table replaced by the predicting query
    (a subquery named by its alias, or by the function), its other text as written: sqlglot's
    regenerated statement altered what it does not carry through (PostgreSQL's ``@ a`` became
    ``$a``, a sample's ``ROWS`` was dropped)."""
    calls = [
        t
        for t in tree.find_all(exp.Table)
        if isinstance(t.this, exp.Anonymous) and t.this.name.lower() == INFER
    ]
    if not calls:
        raise LoomSyntaxError(
            f"{INFER} is a table function: use it in FROM", hint=f"write {FORMS[INFER]}"
        )
    for call in calls:
        _refuse_table_clauses(call)
    spans = [_splice(call, statement, tokens, dialect, catalog) for call in calls]
    for start, end, replacement in sorted(spans, reverse=True):
        statement = statement[:start] + replacement + statement[end:]
    return statement
