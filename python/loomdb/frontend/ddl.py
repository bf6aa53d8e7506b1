"""Rewrite loomdb's SQL forms into calls of its functions, with sqlglot's tree and builders.

* ``CREATE INDEX name ON table USING mlweaving|toc|dense (col, …) WITH (label = y, k = v, …)``
  → ``SELECT loom_create_index('name', 'table', 'y', '{"format": …, "features": [...], …}')``;
* DoppioDB's forms (MLWeaving §3): ``CREATE INDEX i ON create_mlweaving('t1' [, 'label'])``,
  ``CREATE INDEX m ON train_mlweaving('t1', epochs [, precision [, lr]])`` (least squares, as the
  paper trains) and ``SELECT * FROM infer_mlweaving(model, 't1', label_index)``; DoppioDB gives
  the label only at inference, so ``create_mlweaving`` takes it as an optional second argument
  and otherwise uses the table's last column; ``label_index`` is accepted and ignored (the
  model knows its features);
* ``DROP INDEX [IF EXISTS] name`` and ``REINDEX INDEX name`` of a loomdb index →
  ``loom_drop_index`` / ``loom_reindex`` (other indexes pass through).
"""

from __future__ import annotations

import json
from typing import Any, Protocol

import sqlglot
from sqlglot import exp
from sqlglot.tokens import Token, TokenType

from loomdb.errors import LoomNotFoundError, LoomSyntaxError

FORMATS = {"mlweaving", "toc", "dense"}
DOPPIO = {"create_mlweaving", "train_mlweaving"}
CREATE_FORM = (
    "CREATE INDEX name ON table USING mlweaving (col, …) WITH (label = y, option = value, …)"
)


class Catalog(Protocol):
    """What the front-end asks the database (``loomdb.api.sql_catalog.DbCatalog``)."""

    def is_index(self, name: str) -> bool: ...

    def index_for(self, table: str, format: str) -> str | None: ...

    def default_label(self, table: str) -> str: ...

    def model_features(self, model: str) -> list[str]: ...


def _call(name: str, *args: Any) -> str:
    values = ["NULL" if a is None else exp.Literal.string(str(a)).sql() for a in args]
    return f"SELECT {name}({', '.join(values)})"


def _value(node: exp.Expression) -> Any:
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this
        number = float(node.this)
        return int(number) if number.is_integer() and "." not in node.this else number
    if isinstance(node, exp.Neg):
        return -_value(node.this)
    return node.name or node.sql()


def _table_name(table: exp.Table) -> str:
    return ".".join(p.name for p in table.parts)


def _literal_args(params: exp.IndexParameters | None) -> list[Any]:
    cols = params.args.get("columns") or [] if params else []
    return [_value(c.this if isinstance(c, exp.Ordered) else c) for c in cols]


def _create_index(tree: exp.Create, catalog: Catalog | None) -> str | None:
    index = tree.this
    if not isinstance(index, exp.Index):
        return None
    name, table = index.name, index.args.get("table")
    params = index.args.get("params")
    if isinstance(table, exp.Table) and table.name.lower() in DOPPIO:
        return _doppio(name, table.name.lower(), _literal_args(params), catalog)
    using = params.args.get("using") if params else None
    fmt = using.name.lower() if using is not None else ""
    if fmt not in FORMATS or params is None or not isinstance(table, exp.Table):
        return None
    columns = [
        c.this.name if isinstance(c, exp.Ordered) else c.name
        for c in params.args.get("columns") or []
    ]
    options: dict[str, Any] = {"format": fmt}
    if columns:
        options["features"] = columns
    storage = params.args.get("with_storage") or []
    props = {p.name.lower(): _value(p.args["value"]) for p in storage}
    label = props.pop("label", None)
    if label is None:
        raise LoomSyntaxError(
            f"CREATE INDEX {name} … USING {fmt} needs the label column",
            hint=f"add WITH (label = column): {CREATE_FORM}",
        )
    options.update(props)
    if tree.args.get("exists"):
        options["if_not_exists"] = True
    return _call("loom_create_index", name, _table_name(table), label, json.dumps(options))


def _doppio(name: str, fn: str, args: list[Any], catalog: Catalog | None) -> str:
    if not args:
        raise LoomSyntaxError(f"{fn}() needs the table name, e.g. {fn}('t1')")
    table = str(args[0])
    if fn == "create_mlweaving":
        label = args[1] if len(args) > 1 else _need(catalog).default_label(table)
        return _call("loom_create_index", name, table, label, json.dumps({"format": "mlweaving"}))
    index = _need(catalog).index_for(table, "mlweaving")
    if index is None:
        raise LoomNotFoundError(
            f"train_mlweaving('{table}', …): {table} has no mlweaving index",
            hint=f"CREATE INDEX … ON create_mlweaving('{table}') first",
        )
    options: dict[str, Any] = {"index": index, "model": "linear"}
    for key, value in zip(("epochs", "precision", "lr"), args[1:]):
        options[key] = value
    return _call("loom_train", name, table, None, json.dumps(options))


def _need(catalog: Catalog | None) -> Catalog:
    if catalog is None:
        raise LoomSyntaxError("DoppioDB's forms need a database to look indexes and models up")
    return catalog


def _infer(tree: exp.Select, dialect: str, catalog: Catalog | None) -> str | None:
    fn = next(
        (f for f in tree.find_all(exp.Anonymous) if f.name.lower() == "infer_mlweaving"), None
    )
    if fn is None:
        return None
    args = fn.expressions
    if len(args) < 2:
        raise LoomSyntaxError("infer_mlweaving(model, 'table', label_index) needs two arguments")
    model, table = _value(args[0]), str(_value(args[1]))
    features = _need(catalog).model_features(model)
    array = exp.Array(expressions=[exp.column(f, quoted=True) for f in features])
    predict = exp.func("loom_predict", exp.Literal.string(model), array)
    inner = exp.select(exp.Star(), exp.alias_(predict, "prediction")).from_(
        exp.to_table(table, dialect=dialect)
    )
    # the table function becomes a subquery in place: the rest of the statement is kept
    target = fn.parent if isinstance(fn.parent, exp.Table) else fn
    target.replace(inner.subquery("infer_mlweaving"))
    return tree.sql(dialect=dialect, normalize_functions="lower")


def _drop(tree: exp.Drop, catalog: Catalog | None) -> str | None:
    if str(tree.args.get("kind", "")).upper() != "INDEX" or catalog is None:
        return None
    tables = tree.args.get("tables") or ([tree.this] if tree.this is not None else [])
    if len(tables) != 1:
        return None
    name = tables[0].name
    return _call("loom_drop_index", name) if catalog.is_index(name) else None


def _reindex(toks: list[Token], catalog: Catalog | None) -> str | None:
    # PostgreSQL's tokenizer keeps the rest of a REINDEX command as one string token
    words = [w for t in toks for w in t.text.split()]
    ours = len(words) == 3 and [w.upper() for w in words[:2]] == ["REINDEX", "INDEX"]
    if ours and catalog is not None and catalog.is_index(words[2]):
        return _call("loom_reindex", words[2])
    return None


def _looks_like_ours(toks: list[Token]) -> bool:
    words = {t.text.lower() for t in toks if t.token_type != TokenType.STRING}
    return bool(words & (FORMATS | DOPPIO | {"infer_mlweaving"}))


def rewrite(text: str, toks: list[Token], dialect: str, catalog: Catalog | None) -> str:
    """The statement to run instead of ``text``, or ``text`` itself when it is not loomdb's."""
    first = toks[0].text.upper() if toks else ""
    if first == "REINDEX":
        return _reindex(toks, catalog) or text
    if first not in ("CREATE", "DROP", "SELECT") or (
        first != "DROP" and not _looks_like_ours(toks)
    ):
        return text
    try:
        tree = sqlglot.parse_one(text, read=dialect)
    except sqlglot.errors.ParseError as e:
        if first == "CREATE":
            raise LoomSyntaxError(f"cannot read {text[:80]!r}: {e}", hint=CREATE_FORM) from None
        return text
    if isinstance(tree, exp.Create):
        out = _create_index(tree, catalog)
    elif isinstance(tree, exp.Drop):
        out = _drop(tree, catalog)
    elif isinstance(tree, exp.Select):
        out = _infer(tree, dialect, catalog)
    elif isinstance(tree, exp.Command) and first == "CREATE":
        raise LoomSyntaxError(f"cannot read {text[:80]!r} as CREATE INDEX", hint=CREATE_FORM)
    else:
        out = None
    return out or text
