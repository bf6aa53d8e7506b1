"""``loomdb.connect()``: DuckDB with loomdb's functions, catalog and SQL front-end.

No paper section.  ``Connection.execute``/``sql`` run loomdb's front-end first (``CREATE INDEX
… USING mlweaving``… become function calls), raise a loomdb function's own error, and return
what DuckDB's own would: ``execute`` the connection itself (as DuckDB's does), ``sql`` a
:class:`Relation`.  A result streams, so a UDF may fail after the statement started (a later
vector, another worker thread): every fetch of the connection (``fetchall``, ``to_arrow_table``,
a reader's batches…) and every read of a relation raises the loomdb function's own error too,
by a ``try`` around DuckDB's own call — nothing is copied.  The error of a script's last
statement gets the note of what the script ran (``steps.Script``) there too: the connection
keeps the script whose result it holds (``held``), and a relation the script it is the last
statement of.
``.duckdb`` is the raw connection (a statement run on it is not seen: run none there between a
script and the fetches of its result); ``register(con)`` equips an existing one (e.g. from a
dbt-duckdb plugin's ``configure_connection``).

A read-only database works: the catalog is created only where the database is writable, and
writing functions say why they cannot run.  Explicit transactions opened through this
connection (``BEGIN``, ``con.begin()``) are tracked, and writing functions refuse to run inside
one (their writes commit on a connection of their own; a ROLLBACK could not undo them).
``interrupt()`` stops a running loomdb call within a batch, and so does Ctrl-C while the
connection runs or fetches a statement from the main thread (see :func:`ctrl_c_interrupts`).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import weakref
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NoReturn

import duckdb
import pyarrow as pa

from loomdb.engines.duckdb import ctrl_c
from loomdb.engines.duckdb.database import DuckDatabase, translate
from loomdb.engines.duckdb.functions import (
    equip,
    raised_in_udf,
    register_functions,
    remove_functions,
)
from loomdb.engines.duckdb.state import ConnectionState, Instance
from loomdb.errors import LoomDatabaseError, LoomInterrupted, LoomOptionError, LoomStateError
from loomdb.store import catalog
from loomdb.store.names import quote_ident
from loomdb.udfs import load

if TYPE_CHECKING:
    from loomdb.frontend.steps import Script

NAMESPACE = {"USE", "SET", "RESET"}  # statements that may change how names resolve


#: DuckDB's relation classes (a relation waiting for aggregates is one too)
_RELATIONS = (
    duckdb.DuckDBPyRelation,
    getattr(duckdb._relation, "GroupedRelation", duckdb.DuckDBPyRelation),
)


def raise_loom(error: Exception) -> NoReturn:
    """Raise, in place of ``error`` that DuckDB (or an Arrow reader of its rows) raised, a
    loomdb UDF's own error (LoomOptionError…, found through the number its text carries),
    ``LoomInterrupted`` for a cancelled statement, ``LoomStateError`` for a closed connection,
    else ``error`` itself."""
    if isinstance(error, duckdb.InterruptException) or (
        isinstance(error, (pa.ArrowException, OSError)) and str(error).startswith("INTERRUPT Error")
    ):  # an Arrow reader of DuckDB's stream gets DuckDB's interrupt as Arrow's error
        raise LoomInterrupted("interrupted: the statement was cancelled") from error
    if isinstance(error, duckdb.ConnectionException) and "closed" in str(error):
        raise LoomStateError(
            "this DuckDB connection is closed (a cursor closes with the connection it came from)",
            hint="open a new one with loomdb.connect(), and close it only when done with it",
        ) from error
    original = raised_in_udf(error)
    if original is None:
        raise _misbound(error) or _miscounted(error) or error
    raise original.with_traceback(None) from None


_HIDDEN_CALL = re.compile(r"'(\w+)__conn\(([^']*), BIGINT\)'")


def _misbound(error: Exception) -> LoomOptionError | None:
    """A loomdb function called with arguments of types no form of it takes: DuckDB's binder
    names the hidden twin a loomdb connection's macro calls (``loom_x__conn(…, BIGINT)``, the
    token last); say it of the function the caller wrote, with its signature."""
    found = _HIDDEN_CALL.search(str(error)) if isinstance(error, duckdb.BinderException) else None
    udf = next((u for u in load() if found and u.name == found.group(1)), None)
    if found is None or udf is None:
        return None
    signature = ", ".join(f"{a.name} {a.type}" for a in udf.args)
    return LoomOptionError(
        f"{udf.name} takes no arguments of types ({found.group(2)})",
        hint=f"{udf.name}({signature}): cast each argument to its type, e.g. "
        "CAST(x AS BIGINT) for a bigint, CAST(x AS VARCHAR) for text",
    )


_MACRO_ARGS = re.compile(r"Macro (\w+)\(\) does not support the supplied arguments")


def _miscounted(error: Exception) -> LoomOptionError | None:
    """A loomdb function called with more or fewer arguments than any form of it takes:
    DuckDB's binder says the macro does not support them; say it of the function, with its
    arguments (those in brackets may be left out)."""
    found = _MACRO_ARGS.search(str(error)) if isinstance(error, duckdb.BinderException) else None
    udf = next((u for u in load() if found and u.name == found.group(1)), None)
    if found is None or udf is None:
        return None
    required = [f"{a.name} {a.type}" for a in udf.args if a.default is None]
    optional = [f"{a.name} {a.type}" for a in udf.args if a.default is not None]
    signature = ", ".join(required)
    for each in optional:
        signature += f" [, {each}" if signature else f"[{each}"
    counts = [str(n) for n in range(len(required), len(udf.args) + 1)]
    told = " or ".join([", ".join(counts[:-1]), counts[-1]] if len(counts) > 1 else counts)
    return LoomOptionError(
        f"{udf.name} takes {told} argument{'' if told == '1' else 's'}, not the number given",
        hint=f"call it as {udf.name}({signature}{']' * len(optional)})",
    )


@contextmanager
def loom_errors(con: Connection | None = None) -> Iterator[None]:
    """Re-raise a loomdb UDF's own error (LoomOptionError…) instead of DuckDB's wrapper; with
    ``con``, what runs is a new statement of it (a relation's read too): an earlier interrupt
    is forgotten, and Ctrl-C meanwhile interrupts it (:func:`ctrl_c_interrupts`)."""
    if con is not None:
        con.state.interrupted.clear()
    with ctrl_c_interrupts(con):
        try:
            yield
        except Exception as e:
            raise_loom(e)


def ctrl_c_interrupts(con: Connection | None) -> Any:
    """While the body runs, Ctrl-C (SIGINT) calls ``con.interrupt()`` (``ctrl_c.interrupts``)."""
    return ctrl_c.interrupts(con)


def _noting(script: Script | None) -> contextlib.AbstractContextManager[None]:
    """``script``'s note (what it ran: ``steps.Script``) on an error the body raises, where a
    script's last statement runs there (a fetch of its result, a read of its relation)."""
    return script.noting() if script is not None else contextlib.nullcontext()


def _translated(
    call: Callable[..., Any], con: Connection | None = None, script: Script | None = None
) -> Callable[..., Any]:
    """``call`` raising :func:`raise_loom`'s errors, relations (and readers, and row iterators)
    it returns made to do the same, and :class:`Relation` arguments unwrapped; with ``con``
    (the loomdb connection it runs on), Ctrl-C meanwhile interrupts it; with ``script``, its
    errors and those of the readers it returns get the script's note (``call`` reads the
    script's last statement)."""

    @functools.wraps(call)
    def translated(*args: Any, **kwargs: Any) -> Any:
        args = tuple(a.duckdb if isinstance(a, Relation) else a for a in args)
        kwargs = {k: v.duckdb if isinstance(v, Relation) else v for k, v in kwargs.items()}
        with _noting(script), loom_errors(con):
            return _wrapped(call(*args, **kwargs), con, script)

    return translated


def _wrapped(value: Any, con: Connection | None = None, script: Script | None = None) -> Any:
    """A relation as a :class:`Relation` (of ``con``), a reader or a generator raising loomdb's
    errors (and, with ``con``, answering Ctrl-C as ``con.interrupt()`` while each is read;
    with ``script``, giving its note: they read the script's last statement)."""
    if isinstance(value, _RELATIONS):
        return Relation(value, con)
    if isinstance(value, pa.RecordBatchReader):
        return pa.RecordBatchReader.from_batches(value.schema, _rows(value, con, True, script))
    if isinstance(value, Iterator):
        return _rows(value, con, script=script)
    return value


def _rows(
    batches: Iterable[Any],
    con: Connection | None = None,
    arrow: bool = False,
    script: Script | None = None,
) -> Any:
    """``batches`` (a reader's record batches, ``iter_rows``' rows) raising loomdb's errors,
    with ``script``'s note.  They are read after the call that made them returned: Ctrl-C
    interrupts ``con`` while each is read (``ctrl_c.read``; an Arrow reader's batch on a
    thread of its own, since Arrow waits for DuckDB's stream in C, where no signal handler
    runs)."""
    with _noting(script):
        try:
            yield from ctrl_c.read(iter(batches), con, waits_in_c=arrow)
        except Exception as e:
            raise_loom(e)


#: a relation's attributes that run it and read its rows (the others make another relation,
#: or say what it is): where its errors are the statement's (``Relation.script``)
READS = frozenset(
    {
        "arrow", "df", "execute", "fetch_arrow_reader", "fetch_arrow_table", "fetch_df",
        "fetch_df_chunk", "fetch_record_batch", "fetchall", "fetchdf", "fetchmany",
        "fetchnumpy", "fetchone", "iter_rows", "materialize", "pl", "preview", "record_batch",
        "shape", "show", "tf", "to_arrow_reader", "to_arrow_table", "to_df", "to_dicts",
        "torch",
    }
)  # fmt: skip


class Relation:
    """DuckDB's relation (``con.sql(…)``, ``con.table(…)``, and every relation made of one) whose
    reads raise a loomdb function's own error: it runs only when read (``fetchall``, ``df``,
    ``to_arrow_reader``, printing…), outside the ``sql`` call that made it.  Every attribute is
    the relation's own; ``.duckdb`` is DuckDB's relation itself (what DuckDB's functions taking
    a relation need: a Relation passed to a method of a loomdb connection or relation is
    unwrapped).  ``con``: the loomdb connection it came from, which Ctrl-C interrupts while
    the relation is read (None for a relation made by :func:`register`'s raw connection).
    ``script``: the script whose last statement it is (``con.sql`` of several statements, or
    of one loomdb runs as several), whose note (what ran: ``steps.Script``) an error of a
    read of its rows gets, as ``con.execute``'s would (not one of a relation made from it,
    which runs more than the statement, nor a write of it to a file or table)."""

    __slots__ = ("con", "duckdb", "script")

    def __init__(self, relation: Any, con: Connection | None = None, script: Script | None = None):
        self.duckdb = relation
        self.con = con
        self.script = script

    def _read(self, name: str) -> Script | None:
        """The script whose note an error of attribute ``name`` gets: none but for a read."""
        return self.script if name in READS else None

    def __getattr__(self, name: str) -> Any:
        with _noting(self._read(name)), loom_errors(self.con):  # a property may run it (shape)
            value = getattr(self.duckdb, name)
        return _translated(value, self.con, self._read(name)) if callable(value) else value

    def __len__(self) -> int:
        with _noting(self.script), loom_errors(self.con):
            return len(self.duckdb)

    def __getitem__(self, key: Any) -> Any:
        return _translated(self.duckdb.__getitem__, self.con)(key)

    def __contains__(self, name: Any) -> bool:
        return name in self.duckdb

    def __str__(self) -> str:
        with _noting(self.script), loom_errors(self.con):
            return str(self.duckdb)

    def __repr__(self) -> str:
        with _noting(self.script), loom_errors(self.con):
            return repr(self.duckdb)

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        """The rows as an Arrow C stream (what ``pa.table(rel)``, polars… read): the stream of
        a reader raising loomdb's errors, where a Python consumer reads it."""
        reader = _translated(self.duckdb.to_arrow_reader, self.con, self.script)()
        return reader.__arrow_c_stream__(requested_schema)


def _read_only(con: duckdb.DuckDBPyConnection) -> bool:
    rows = con.execute(
        "SELECT readonly FROM duckdb_databases() WHERE database_name = current_database()"
    ).fetchall()  # fetch to the end: an unfinished result blocks the connection's cursors
    return bool(rows and rows[0][0])


def _database(con: duckdb.DuckDBPyConnection) -> str:
    try:
        return str(con.execute("SELECT current_database()").fetchall()[0][0])
    except duckdb.Error as e:
        raise translate(e) from None


_instances: weakref.WeakValueDictionary[str, Instance] = weakref.WeakValueDictionary()


def register(
    con: duckdb.DuckDBPyConnection, progress: bool = True, *, private: bool = False
) -> tuple[ConnectionState, Instance]:
    """Create loomdb's catalog in ``con``'s database (if writable), register every function
    (once per database), and equip ``con`` with its macros.  A connection already equipped
    (registered before, or a loomdb connection's ``.duckdb``) keeps its functions, macros and
    state: registering the functions again failed on its TEMP macros' names ("loom_train is
    not an scalar function").  ``private``: ``con`` is the one connection to a database made
    just now (``loomdb.connect()``'s in-memory one), where no connection can have registered
    loomdb's functions, so they are not looked for (a scan of DuckDB's 3,000 functions, a
    quarter of the connection's start)."""
    read_only = _read_only(con)
    try:
        if not read_only:
            for statement in catalog.ddl("duckdb"):
                con.execute(statement)
    except duckdb.Error as e:
        raise translate(e) from None
    identity = _identity(con, read_only)
    instance = _instances.get(identity)
    if instance is None:
        instance = _instances[identity] = Instance(identity, read_only)
    known = instance.equipped.get(con)
    if known is not None:  # this very connection again (a loomdb connection's .duckdb): as is
        known.progress = progress
        return known, instance
    state = ConnectionState(identity, read_only, progress)
    if not private:
        _refuse_a_second_registration(con, instance)
    instance.add(con, state)
    register_functions(con, instance, new=private)
    instance.owner = weakref.ref(con)
    equip(con, state)
    return state, instance


def _refuse_a_second_registration(con: duckdb.DuckDBPyConnection, instance: Instance) -> None:
    """Refuse to register loomdb's functions through a second connection to one database
    file: DuckDB keeps one set per database, owned by the connection that made it, and
    frees it when that connection closes while the others still call it (a crash), so a
    second set is DuckDB's raw "already exists".  ``con`` registering again is fine."""
    owner = instance.owner() if instance.owner is not None else None
    if owner is con:
        return
    try:
        found = con.execute(
            "SELECT 1 FROM duckdb_functions() WHERE function_name = 'loom_train' LIMIT 1"
        ).fetchall()
    except duckdb.Error as e:
        raise translate(e) from None
    if found:
        raise LoomStateError(
            "this database is already open with loomdb's functions through another connection "
            "of this process",
            hint="use that connection (or its .cursor() for another thread), or close it "
            "first: e.g. a notebook cell reconnecting should call con.close() before "
            "loomdb.connect again",
        )


def _identity(con: duckdb.DuckDBPyConnection, read_only: bool) -> str:
    """The database's id in its catalog, and for a file its path: a copy of a database file
    holds the same id, and two copies open in one process must not share their functions'
    connections or their cached models."""
    found = catalog.database_id(DuckDatabase(con, ConnectionState("")), not read_only)
    try:
        ((path,),) = con.execute(
            "SELECT path FROM duckdb_databases() WHERE database_name = current_database()"
        ).fetchall()
    except duckdb.Error as e:
        raise translate(e) from None
    return found if path is None else f"{found}@{os.path.realpath(path)}"


def _fetch(name: str) -> Callable[..., Any]:
    """DuckDB's fetch method ``name`` of the connection's result, raising loomdb's errors."""
    method = getattr(duckdb.DuckDBPyConnection, name)

    def fetch(self: Connection, *args: Any, **kwargs: Any) -> Any:
        with _noting(self.held):
            try:
                with ctrl_c_interrupts(self):
                    return _wrapped(method(self.duckdb, *args, **kwargs), self, self.held)
            except Exception as e:
                raise_loom(e)

    fetch.__name__ = fetch.__qualname__ = name
    fetch.__doc__ = method.__doc__
    return fetch


_DDL = {"CREATE", "DROP", "REINDEX"}  # what loomdb's DDL forms begin with


def _ddl_rewritten(piece: str, statement: str) -> bool:
    """Whether the front-end rewrote DDL (``CREATE INDEX … USING``, ``DROP INDEX``, DoppioDB's
    forms…) into ``statement``, a call of loomdb's that DuckDB would run only when read."""
    words = piece.split(None, 1)  # (CREATE TABLE … AS … infer_mlweaving(…) stays DDL: DuckDB's)
    called = statement.startswith("SELECT loom_") and not piece.startswith("SELECT loom_")
    return called and bool(words) and words[0].upper() in _DDL


def _summaries_query(summaries: list[tuple[str, Any]]) -> tuple[str, list[Any]]:
    """A query, and its parameters, giving ``summaries`` (each a column's name and a value of
    loomdb's DDL), one row each, in one text column: the name they share, else that of the
    function they call (``loom_reindex('a')``, ``loom_reindex('b')``: ``loom_reindex``)."""
    names = {name for name, _ in summaries}
    name = names.pop() if len(names) == 1 else summaries[0][0].split("(", 1)[0]
    values = [None if v is None else str(v) for _, v in summaries]
    if len(values) == 1:
        return f"SELECT CAST($1 AS VARCHAR) AS {quote_ident(name)}", values
    return f"SELECT unnest(CAST($1 AS VARCHAR[])) AS {quote_ident(name)}", [values]


class Connection:
    """A DuckDB connection whose statements pass through loomdb's SQL front-end."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        progress: bool = True,
        parent: Connection | None = None,
        private: bool = False,
    ):
        self.duckdb = con
        #: the script whose last statement's result the connection holds (its fetches give
        #: an error the script's note, as its ``execute`` did); None: not one of loomdb's
        self.held: Script | None = None
        self.home: str = parent.home if parent is not None else _database(con)  # loomdb's
        if parent is None:
            self.state, self.instance = register(con, progress, private=private)
        else:  # a cursor: the database's functions exist; it needs its own state and macros
            self.instance = parent.instance
            self.state = ConnectionState(parent.state.identity, parent.state.read_only, progress)
            self.instance.add(con, self.state)
            equip(con, self.state)

    @contextmanager
    def _track(self, statement: str) -> Iterator[None]:
        """Run the body (``statement``), noting what it changed of the connection's state that
        loomdb follows.  The transaction is what DuckDB made of it (``steps.transaction``): a
        BEGIN it refused (``BEGIN ISOLATION LEVEL …``) opened none, a statement it could not
        parse (``ROLLBACK TO SAVEPOINT``, ``COMMIT AND CHAIN``) left an open one open (and
        aborted), a COMMIT or ROLLBACK that failed otherwise ended it (DuckDB rolls back a
        failed commit).  A change of namespace is read before the next statement."""
        from loomdb.frontend.steps import first_word, transaction

        self._follow_namespace()
        if first_word(statement) in NAMESPACE:
            self.state.namespace_changed = True
        change = transaction(statement)
        try:
            yield
        except duckdb.ParserException:
            raise
        except BaseException:
            if change == "end":
                self.state.in_transaction = False
            raise
        if change is not None:
            self.state.in_transaction = change != "end"

    def _follow_namespace(self) -> None:
        """After a USE/SET/RESET, read how this connection now resolves names, for loomdb's
        own cursor to resolve a source's names as the caller does (it is idle now: the
        statement before was fetched, and a USE or SET returns no rows)."""
        state = self.state
        if not state.namespace_changed:
            return
        state.namespace_changed = False
        (database, path), *_ = self.duckdb.execute(
            "SELECT current_database(), current_setting('search_path')"
        ).fetchall()
        state.elsewhere = None if database == self.home else database
        state.search_path = "" if state.elsewhere is not None else str(path or "")

    def _run(self, sql: str, last: Any, rows: Any, now: bool = False) -> tuple[Any, Script]:
        """Run every statement but the last, then ``last(statement)`` on the last one; each is
        rewritten once the one before it has run (a script may create the index its next
        statement drops: the next one was rewritten before it ran, so DROP INDEX reached
        DuckDB and train_mlweaving found no index).  A last statement loomdb runs as several
        (``REINDEX TABLE t`` of a table with several loomdb indexes: one ``loom_reindex``
        each) gives every one's summary, one row each: ``rows(query, params)`` (DuckDB's
        ``execute`` or ``sql``) over them.  ``now`` (``sql``, whose relation runs when read):
        a last statement that is DDL of loomdb's runs at once instead, as DuckDB runs its own,
        giving ``rows`` over its summary.  Returns what the last one gave, and the script."""
        self.state.interrupted.clear()
        self.held = None
        script = self._script(sql)
        summaries: list[tuple[str, Any]] = []  # the last statement's steps': (column, value)
        with script.noting(), loom_errors(self):
            for statement in script:
                several = script.number == len(script.pieces) and len(script.steps) > 1
                ddl = now and script.last() and _ddl_rewritten(script.pieces[-1], statement)
                with self._track(statement):
                    if several or ddl:
                        summaries.append(self._summary(statement))
                        if script.last():
                            return rows(*_summaries_query(summaries)), script
                    elif script.last():
                        return last(statement), script
                    else:
                        self.duckdb.execute(statement).fetchall()  # results stream: finish each
            return None, script

    def _script(self, sql: str) -> Script:
        """``sql``'s statements, each rewritten by the front-end just before it runs, and what
        ran when one fails (``frontend.steps``)."""
        from loomdb.engines.duckdb.frontend_catalog import pieces
        from loomdb.frontend.steps import Script

        raw, rewrite = pieces(self, sql)
        return Script(raw, rewrite, "duckdb", self.state.in_transaction)

    def each(self, sql: str) -> Iterator[Connection]:
        """Run a script statement by statement, yielding this connection holding each one's
        result (fetch it before the next; an error of the fetch gets the script's note): what
        ``loomdb sql`` prints."""
        self.state.interrupted.clear()
        self.held = None
        script = self._script(sql)
        with script.noting(), loom_errors():
            for statement in script:
                with self._track(statement), ctrl_c_interrupts(self):
                    self.duckdb.execute(statement)
                self.held = script  # its fetches fail with the note of what ran
                yield self
                with ctrl_c_interrupts(self):
                    self.duckdb.fetchall()  # whatever the caller left: a result must end first

    def execute(self, sql: str, parameters: Any = None) -> Connection:
        """Run ``sql``; this connection, holding the last statement's result (DuckDB's
        ``execute`` returns its connection too), whose fetches raise loomdb's errors."""
        _, self.held = self._run(
            sql, lambda s: self.duckdb.execute(s, parameters), self.duckdb.execute
        )
        return self

    def sql(self, query: str, *, alias: str = "", params: Any = None) -> Relation | None:
        """The last statement as a relation that runs when read (None for one that returns
        no rows, as DuckDB's ``sql``); loomdb's DDL runs at once, as DuckDB runs its own
        (``con.sql("CREATE INDEX … USING toc …")`` built nothing until read), giving a
        relation over its summary.  Its reads raise loomdb's errors."""

        def last(statement: str) -> Any:
            return self.duckdb.sql(statement, alias=alias, params=params)

        def rows(summaries: str, values: list[Any]) -> Any:
            return self.duckdb.sql(summaries, alias=alias, params=values)

        relation, script = self._run(query, last, rows, now=True)
        return Relation(relation, self, script) if isinstance(relation, _RELATIONS) else relation

    query = from_query = sql  # DuckDB's other names of ``sql``

    def _summary(self, statement: str) -> tuple[str, Any]:
        """Run ``statement``, a call of loomdb's DDL (one call, one value) now: its column's
        name and its value."""
        result = self.duckdb.execute(statement)
        ((value,),) = result.fetchall()
        return str(result.description[0][0]), value

    # A result streams: its fetches run UDFs too.  Each is DuckDB's own in a try (no copy).
    fetchone = _fetch("fetchone")
    fetchmany = _fetch("fetchmany")
    fetchall = _fetch("fetchall")
    fetchnumpy = _fetch("fetchnumpy")
    fetchdf = _fetch("fetchdf")
    fetch_df = _fetch("fetch_df")
    df = _fetch("df")
    fetch_df_chunk = _fetch("fetch_df_chunk")
    to_arrow_table = _fetch("to_arrow_table")
    to_arrow_reader = _fetch("to_arrow_reader")
    torch = _fetch("torch")
    tf = _fetch("tf")

    def begin(self) -> Connection:
        self.held = None
        self.duckdb.begin()
        self.state.in_transaction = True
        return self

    def commit(self) -> Connection:
        self.held = None
        self.state.in_transaction = False
        self.duckdb.commit()
        return self

    def rollback(self) -> Connection:
        self.held = None
        self.state.in_transaction = False
        self.duckdb.rollback()
        return self

    def interrupt(self) -> None:
        """Stop the running statement, a loomdb call included (within one batch)."""
        self.state.interrupted.set()
        self.duckdb.interrupt()

    def cursor(self) -> Connection:
        """A new connection to the same database, with loomdb's functions and front-end."""
        return Connection(self.duckdb.cursor(), self.state.progress, parent=self)

    def database(self) -> DuckDatabase:
        return DuckDatabase(self.duckdb.cursor(), self.state)  # catalog reads only

    def close(self) -> None:
        """Close the connection; when its functions are the database's (the first connection
        loomdb registered), remove them first: DuckDB would free them while another
        connection to the file could still call them, and that call would crash."""
        if self.instance.owner is not None and self.instance.owner() is self.duckdb:
            remove_functions(self.duckdb)
            self.instance.owner = None
        self.duckdb.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        """DuckDB's own attribute; a method raising loomdb's errors, returning relations as
        :class:`Relation`s (``con.table('t')``, ``con.query(…)``)."""
        value = getattr(self.duckdb, name)
        if not callable(value):
            return value
        call = _translated(value, self)

        def method(*args: Any, **kwargs: Any) -> Any:
            self.held = None  # (executemany, a method of DuckDB's running a statement…)
            out = call(*args, **kwargs)
            return self if out is self.duckdb else out  # (executemany, register…)

        return method


def _open(path: str, read_only: bool, config: dict[str, Any]) -> duckdb.DuckDBPyConnection:
    """DuckDB's connection to ``path``; a loomdb error with a hint where none opens (DuckDB's
    own is its ``__cause__``)."""
    try:
        return duckdb.connect(path, read_only=read_only, config=config)
    except duckdb.Error as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if not isinstance(e, duckdb.IOException):
            raise LoomOptionError(
                f"DuckDB refused the connection's options: {first}",
                hint="loomdb.connect's keyword arguments other than progress and read_only are "
                "DuckDB's configuration options (SELECT name FROM duckdb_settings() lists them)",
            ) from e
        raise LoomDatabaseError(
            f"could not open the DuckDB database {path}: {first}",
            hint="give the path of a DuckDB database file in a folder that exists (a new file "
            "is created, but not with read_only=True), that no other process holds open; no "
            "path opens an in-memory database",
        ) from e


def connect(path: str | None = None, *, progress: bool = True, **config: Any) -> Connection:
    read_only = bool(config.pop("read_only", False))
    path = path or ":memory:"
    con = _open(path, read_only, config)
    try:  # ":memory:" is a new database of its own (":memory:name" is shared, a file may be)
        return Connection(con, progress, private=path == ":memory:")
    except BaseException:
        con.close()  # no connection left holding the file
        raise
