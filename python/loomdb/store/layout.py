"""Lay a source out in a storage format, find it again, read an epoch of it.

No paper section of its own: Bismarck's "shuffle once, then scan" (rows come out of the engine
in a seeded pseudo-random order and are cut into minibatches once) with each format's encoding.
A layout is stored (an index: ``build``, ``open_index``) or, for a train without an index,
kept in memory when it fits ``cache_mb`` and in a temporary table otherwise (``scratch``); the
trainer reads either through :class:`Layout`.  A sparse source (``store/sparse.py``) is
profiled, read and cut into minibatches as CSR rows, and each format encodes those
(``Format.sparse_encoder``): no dense row is ever built for it.

Any SQL derived from a catalog row — the index's source, re-run to rebuild it or to tell that it
is stale, and its storage table — runs as the row's owner (``db.as_role``), so a superuser
acting on another role's index can never be made to run that role's code with its own rights.
"""

from __future__ import annotations

import contextlib
import math
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

import numpy as np

from loomdb.errors import (
    LoomConflictError,
    LoomDatabaseError,
    LoomDataError,
    LoomError,
    LoomFormatError,
    LoomNotFoundError,
    LoomOptionError,
    LoomStateError,
)
from loomdb.options import Choices, Interval, Names, Option, Options
from loomdb.seams import Aggregates, Batch, IndexInfo
from loomdb.store import catalog, formats, grouped, sparse, storage
from loomdb.store import encoding as encodings
from loomdb.store.budget import MB, in_mb
from loomdb.store.db import Database
from loomdb.store.formats.base import Format
from loomdb.store.names import quote_ident
from loomdb.store.norms import RowNorms
from loomdb.store.preprocess import PreprocessOption
from loomdb.store.source import NULLS_HINT, SourceProfile, complete_rows, label_value
from loomdb.store.source import number as as_double

CHUNK = 8192  # rows per chunk read from the source
FLUSH_BYTES = 16 << 20  # stored rows are inserted this much at a time
PROGRESS_S = 2.0

OPTIONS = Options(
    "layout",
    Option("format", Choices(formats.names), "dense", "storage format"),
    Option("features", Names(), None, "the feature columns (default: every numeric one)"),
    Option(
        "batch_size",
        Interval(True, 1, 1_000_000),
        256,
        "rows per stored minibatch (256 for every format, chosen by measurement)",
    ),
    Option("seed", Interval(True, 0, 2**31 - 1), 42, "the seed of the one-time shuffle"),
    Option("nulls", Choices(["error", "skip"]), "error", "what rows with NULLs do"),
    Option("dtype", Choices(["float64", "float32"]), "float64", "the dense format's values"),
    Option(
        "sparse",
        sparse.SparseOption(),
        None,
        "a sparse source's indices and values array columns and width (store/sparse.py)",
    ),
    Option(
        "preprocess",
        PreprocessOption(),
        None,
        "per-column encoding: a text column one-hot (top_k) or hashed (encode: hash, buckets), "
        "impute of a number (store/preprocess.py)",
    ),
)
BUILT_WITH: tuple[str, ...] = (
    "format",
    "features",
    "batch_size",
    "seed",
    "nulls",
    "dtype",
    "sparse",
    "preprocess",
)
OPTIONS += grouped.OPTIONS  # SlimML's grouping (store/grouped.py)
BUILT_WITH += tuple(grouped.OPTIONS.names())


def options_of(fmt: Format) -> Options:
    """The shared layout options plus what ``fmt`` accepts."""
    return OPTIONS + fmt.options


class GroupRows(Protocol):
    """A grouped layout's stored rows read by group (``store.grouped``)."""

    def read_ids(self, ids: Sequence[int], parts: int) -> Iterator[storage.Stored]: ...

    def summaries(self, count: int) -> list[storage.Stored]: ...


@dataclass
class Layout:
    """Minibatches laid out once: the index row (or a scratch one) and where its rows are."""

    info: IndexInfo
    fmt: Format
    read_stored: Callable[[int, int, int], Iterator[storage.Stored]]
    close: Callable[[], None] = lambda: None
    by_group: GroupRows | None = None  # a grouped (SlimML) layout's reads by group
    _aggregates: Aggregates | None = None
    relation: str | None = None  # the storage table, when the layout is a table
    owner: str | None = None  # whose table: read with the owner's rights
    # what trains over this very object keep between them (``store/epochs.Kept``: the decoded
    # epochs a tune's trials share)
    kept: dict[Any, Any] = field(default_factory=dict)

    def batches(self, first: int, stop: int, precision: int) -> Iterator[Batch]:
        m = sparse.feature_count(self.info)
        for stored in self.read_stored(first, stop, self.fmt.parts(precision)):
            yield self.fmt.decode(stored, m, precision)

    @property
    def grouped(self) -> bool:
        return self.by_group is not None

    def groups(self, ids: Sequence[int], precision: int) -> Iterator[Batch]:
        """Groups ``ids`` (ascending) of a grouped layout, one batch each; no other group's
        rows are returned by the engine."""
        assert self.by_group is not None
        m, sizes = len(self.info.columns), self.aggregates().rows
        for stored in self.by_group.read_ids(ids, self.fmt.parts(precision)):
            if stored.rows != sizes[stored.batch]:
                raise storage.damaged(
                    self.info.name or "scratch",
                    f"group {stored.batch} holds {stored.rows} rows, not {sizes[stored.batch]}",
                )
            yield self.fmt.decode(stored, m, precision)

    def aggregates(self) -> Aggregates:
        """The groups table of a grouped layout, read (and checked) once."""
        assert self.by_group is not None
        if self._aggregates is None:
            stored = self.by_group.summaries(self.info.batches)
            n = len(self.info.columns)
            self._aggregates = grouped.aggregates(stored, n, self.info.name or "scratch")
        return self._aggregates


class Progress:
    """Plain progress lines for a long layout: at most one every ``PROGRESS_S`` seconds."""

    def __init__(self, db: Database, what: str, total: int, quiet: bool = False):
        self.db, self.what, self.total, self.quiet = db, what, total, quiet
        self.last = time.monotonic()

    def start(self, source: str, fmt: str) -> None:
        if not self.quiet:
            self.db.notice(f"{self.what}: laying out {self.total:,} rows of {source} as {fmt}")

    def phase(self, text: str) -> None:
        """A step that reports no rows while it runs (SlimML's aggregation)."""
        if not self.quiet:
            self.db.notice(f"{self.what}: {text}")
        self.last = time.monotonic()

    def rows(self, done: int) -> None:
        self.db.check_interrupt()
        now = time.monotonic()
        if not self.quiet and now - self.last >= PROGRESS_S:
            self.last = now
            pct = 100.0 * done / max(self.total, 1)
            self.db.notice(f"{self.what}: laid out {done:,} of {self.total:,} rows ({pct:.0f}%)")


def _minibatches(chunks: Iterable[np.ndarray], size: int) -> Iterator[np.ndarray]:
    """Re-cut a stream of row chunks into minibatches of ``size`` rows (the last shorter)."""
    pending: list[np.ndarray] = []
    held = 0
    for chunk in chunks:
        pending.append(chunk)
        held += len(chunk)
        while held >= size:
            rows = np.concatenate(pending) if len(pending) > 1 else pending[0]
            yield rows[:size]
            rest = rows[size:]
            pending, held = ([rest] if len(rest) else []), len(rest)
    if held:
        yield np.concatenate(pending) if len(pending) > 1 else pending[0]


class RowEncoding:
    """The numeric formats' pass: shuffled rows cut into minibatches, each encoded into parts
    (labels first), the squared row norms gathered on the way (``store/norms.py``)."""

    def __init__(
        self,
        db: Database,
        prof: SourceProfile,
        fmt: Format,
        opts: dict[str, Any],
        info: IndexInfo,
        progress: Progress,
    ):
        self.args = (db, prof, fmt, opts, info, progress)
        self.norms = RowNorms(prof.stats)

    def __iter__(self) -> Iterator[tuple[int, int, int, list[bytes], bytes | None]]:
        """``(minibatch, rows, first part, parts, aggregated point)`` of every minibatch (or
        SlimML group; the point is None but in a grouped layout)."""
        for number, X, parts, point in _encoded(*self.args):
            self.norms.add(X)
            yield number, len(X), 0, parts, point

    def stats(self) -> dict[str, Any]:
        return {"sq_norm": self.norms.summary()}


def _encoded(
    db: Database,
    prof: SourceProfile,
    fmt: Format,
    opts: dict[str, Any],
    info: IndexInfo,
    progress: Progress,
) -> Iterator[tuple[int, Any, list[bytes], bytes | None]]:
    """``(number, features, parts, aggregated point)`` of every minibatch (or SlimML group) of
    the shuffled source; the point is None but in a grouped layout."""
    if isinstance(prof, sparse.SparseProfile):
        if opts.get("slimml"):
            raise LoomOptionError(
                f"{prof.source} is a sparse source: SlimML groups dense rows only",
                hint="leave slimml out, or lay out one column per feature",
            )
        yield from _encoded_sparse(db, prof, fmt, opts, progress)
        return
    values, expand = prof.read_values(db.type("double"), db.dialect)
    read = db.read_matrix(prof.relation, values, prof.where, opts["seed"], CHUNK, prof.rows)
    chunks = map(expand, read)
    if opts.get("slimml"):
        yield from grouped.encoded(chunks, prof, fmt, opts, info, progress)
        return
    encode = fmt.encoder(prof.stats, {**opts, "feature_names": prof.features})
    done = 0
    for number, rows in enumerate(_minibatches(chunks, opts["batch_size"])):
        if not np.isfinite(rows).all():
            raise LoomDataError(f"{prof.source} holds NaN or infinite values")
        X = rows[:, :-1]
        yield number, X, [fmt.encode_labels(rows[:, -1]), *encode(X)], None
        done += len(rows)
        progress.rows(done)


def _encoded_sparse(
    db: Database, prof: sparse.SparseProfile, fmt: Format, opts: dict[str, Any], progress: Progress
) -> Iterator[tuple[int, Any, list[bytes], None]]:
    """The same for a sparse source: CSR minibatches, never a dense row (store/sparse.py)."""
    encode = fmt.sparse_encoder(prof.stats, opts, len(prof.columns))
    rows = sparse.read_rows(db, prof, opts["seed"], CHUNK)
    done = 0
    for number, (y, X) in enumerate(sparse.minibatches(rows, opts["batch_size"])):
        if not (np.isfinite(y).all() and np.isfinite(X.values).all()):
            raise LoomDataError(f"{prof.source} holds NaN or infinite values")
        yield number, X, [fmt.encode_labels(y), *encode(X)], None
        done += len(y)
        progress.rows(done)


def _info(name: str, prof: SourceProfile, fmt: Format, opts: dict[str, Any]) -> IndexInfo:
    options = {k: v for k, v in opts.items() if k != "features"}
    if isinstance(prof, sparse.SparseProfile):
        options["sparse"] = prof.spec.as_option()
    if prof.split is not None:
        options["split"] = prof.split
    return IndexInfo(
        name=name,
        source=prof.source,
        label=prof.label,
        columns=prof.features,
        format=fmt.name,
        format_version=fmt.version,
        options=options,
        stats={**prof.stored_stats(), "kinds": dict(prof.kinds)},  # what check_fresh compares
        label_counts=prof.label_counts,
        rows=prof.rows,
        skipped=prof.skipped,
        batches=0,
        bytes=0,
        source_signature="",
        uid=uuid.uuid4().hex,
    )


def _lay_out(
    db: Database,
    info: IndexInfo,
    prof: SourceProfile,
    fmt: Format,
    opts: dict[str, Any],
    sink: Callable[[list[tuple]], None],
    progress: Progress,
    checked: bool = True,
) -> None:
    """Every minibatch's rows into ``sink``, ``FLUSH_BYTES`` at a time; ``checked``: each with
    its checksum (rows private to one call go without: ``store.storage``)."""
    progress.start(prof.source, fmt.name)
    encoding = fmt.encoding(db, prof, opts, progress) or RowEncoding(
        db, prof, fmt, opts, info, progress
    )
    pending: list[tuple] = []
    size = 0
    for number, rows, first, parts, point in encoding:
        pending += storage.rows_of(info.uid, number, rows, fmt.version, parts, first, checked)
        if point is not None:
            pending.append(storage.summary_row(info.uid, number, rows, fmt.version, point, checked))
        nbytes = sum(len(p) for p in parts)
        size += nbytes
        info.batches, info.bytes = max(info.batches, number + 1), info.bytes + nbytes
        if size >= FLUSH_BYTES:
            sink(pending)
            pending, size = [], 0
    sink(pending)
    info.stats.update(encoding.stats())


def feature_columns(info: IndexInfo) -> list[str]:
    """The source columns an index's features come from (its columns, unless encoded)."""
    encoding = encodings.load(info.stats.get("encoding"))
    return list(info.columns) if encoding is None else encodings.columns(encoding)


# How the fingerprint of an encoded source begins when it hashes each text column's feature index
# (``encoding.codes_sql``, one value a row) instead of each feature (one per category or bucket:
# PostgreSQL, 100,000 rows, 64 one-hot features, 0.6 s of every train on such an index); a
# fingerprint recorded before without it is checked as it was made, so older indexes stay fresh.
# The features are a function of the indices and the indices of the features: both see the
# same changes.
CODES = "codes:"


def _signature(
    db: Database, info: IndexInfo, kinds: dict[str, str], like: str | None = None
) -> str:
    """The source's fingerprint as the index reads it (``like``: the recorded one, whose way of
    hashing a check follows)."""
    prefix, rel, exprs, where, rest = _fingerprinted(db, info, kinds, like)
    return prefix + db.signature(rel, exprs, where, rest)


def _versions_table(db: Database, info: IndexInfo) -> str | None:
    """The table whose row versions stand for the fingerprint (None: a query source)."""
    return _table_of(db, info.table)


def _table_of(db: Database, source: str) -> str | None:
    from loomdb.store.names import is_table_name, relation

    return relation(source, db.dialect) if is_table_name(source) else None


def _versions_before(db: Database, source: str) -> str | None:
    """The source table's row versions before a build reads it (None where the engine or the
    relation names none): see :func:`_refuse_written_meanwhile`."""
    table = _table_of(db, source)
    return None if table is None else db.row_versions(table)


def _refuse_written_meanwhile(info: IndexInfo, before: str | None) -> None:
    """A build reads its source in several statements (profile, layout, fingerprint), each
    seeing what was committed when it began: rows another session wrote between the layout and
    the fingerprint would be missing from an index whose fingerprint says it holds them.
    Where the table's row versions are known, the ones seen before the first read must be the
    ones recorded with the fingerprint."""
    if before is not None and info.stats.get("versions") != before:
        raise LoomStateError(
            f"{info.source} was written to while index {info.name} was built from it: the "
            "index would not hold what its source holds, so it is not recorded",
            hint="build it again once the writes are done, or in a transaction that first "
            f"takes LOCK TABLE {info.source} IN SHARE MODE",
        )


def _fingerprinted(
    db: Database, info: IndexInfo, kinds: dict[str, str], like: str | None
) -> tuple[str, str, list[str], str | None, str | None]:
    """What the fingerprint hashes: its prefix, relation, expressions, filter and the part of
    ``like`` after the prefix."""
    from loomdb.store.names import relation

    cols = [*info.columns, info.label]
    double = db.type("double")
    encoding = encodings.load(info.stats.get("encoding"))
    label_kind, classes = kinds.get(info.label, "numeric"), info.stats.get("label_classes")
    label = label_value(info.label, label_kind, classes, double)
    if encoding is not None:  # the encoded columns, as the layout read them
        strict = [*encodings.strict(encoding), info.label]
        where = complete_rows(strict) if info.options.get("nulls") == "skip" else None
        rel = relation(info.table, db.dialect)  # a hashed column's bucket once a row
        taken = [c for c, _ in db.columns(rel)] if any(e.hashed for e in encoding) else []
        rel, buckets = encodings.with_buckets(rel, encoding, db.dialect, taken)
        if like is None or like.startswith(CODES):
            exprs = [*encodings.codes_sql(encoding, double, db.dialect, buckets), label]
            return CODES, rel, exprs, where, like and like[len(CODES) :]
        exprs = [*encodings.sql(encoding, double, db.dialect, buckets), label]  # as recorded
        return "", rel, exprs, where, like
    exprs = [  # the array columns of a sparse source and an image column's bytes as they are
        quote_ident(c)
        if (info.options.get("sparse") and c != info.label) or kinds.get(c) == "bytes"
        else label
        if c == info.label
        else as_double(c, kinds.get(c, "numeric"), double)
        for c in cols
    ]
    where = complete_rows(cols) if info.options.get("nulls") == "skip" else None
    return "", relation(info.table, db.dialect), exprs, where, like


def _record_fingerprint(db: Database, info: IndexInfo, kinds: dict[str, str]) -> None:
    """Record the source's fingerprint in ``info`` and, where the engine can name them, its
    table's row versions in the same snapshot (``check_fresh`` compares those first)."""
    prefix, rel, exprs, where, _ = _fingerprinted(db, info, kinds, None)
    table = _versions_table(db, info)
    if table is None:
        info.source_signature = prefix + db.signature(rel, exprs, where)
        return
    signature, versions = db.signature_and_versions(rel, exprs, where, table)
    info.source_signature = prefix + signature
    if versions is not None:
        info.stats["versions"] = versions


def build(
    db: Database,
    name: str,
    source: str,
    label: str,
    opts: dict[str, Any],
    what: str,
    quiet: bool = False,
    replacing: bool = False,
    shown: str | None = None,
) -> IndexInfo:
    """Profile ``source``, write its minibatches as index ``name``, record it in the catalog
    (``replacing``: in place of index ``name``, dropped when the new one is complete; ``shown``:
    the source as the catalog shows it, where not ``source``).  The
    minibatches go to a table of their own, which becomes the index's storage table in the
    one transaction that records it: in bounded memory on every engine (``Database.staged``),
    nothing visible as the index until it is whole, and the old index readable meanwhile."""
    fmt = formats.get(opts["format"])
    fmt.check(opts)
    grouped.check(opts)
    if not replacing:
        _refuse_orphan(db, name)
    before = _versions_before(db, source)
    prof = fmt.profile(db, source, label, opts)
    info = _info(name, prof, fmt, opts)
    table = catalog.qualified(db, source)  # read as resolved now, whatever schema is later
    if table is not None:
        info.stats["relation"] = table
    info.source = shown or info.source
    staged = storage.staged_relation(info.uid)
    with db.staged(staged):
        storage.create(db, staged, keyed=bool(opts.get("slimml")))
        sink = partial(storage.write, db, staged)
        _lay_out(db, info, prof, fmt, opts, sink, Progress(db, what, prof.rows, quiet))
        _record_fingerprint(db, info, prof.kinds)
        _refuse_written_meanwhile(info, before)
        _record(db, info, staged, replacing)
    return catalog.get_index(db, name)


def _record(db: Database, info: IndexInfo, staged: str, replacing: bool) -> None:
    """Make ``staged`` index ``info``'s storage table and record the index, in one
    transaction (``replacing``: in place of the index of its name).  Another session may have
    recorded an index of that name since this build began: then nothing is recorded, and the
    error says so."""
    name = info.name
    try:  # the engine's own error, a taken key or table name, would not say what happened
        with db.atomic():
            if replacing:
                drop(db, name)
            elif catalog.index_exists(db, name):
                raise _built_meanwhile(name)
            db.execute(f"ALTER TABLE {staged} RENAME TO {quote_ident(name)}")
            catalog.put_index(db, info)
    except LoomConflictError:  # a build of the name in flight in another session
        if replacing:
            raise
        raise _built_meanwhile(name) from None
    except LoomDatabaseError:  # the name's table, which another session's build committed
        if replacing or not catalog.index_exists(db, name):
            raise
        raise _built_meanwhile(name) from None


def _built_meanwhile(name: str) -> LoomConflictError:
    return LoomConflictError(
        f"index '{name}' was built by another session at the same time: this build of it "
        "is not recorded",
        hint=f"use that index once that session has committed it, or drop it with "
        f"loom_drop_index('{name}') and build again",
    )


def _refuse_orphan(db: Database, name: str) -> None:
    """Refuse to lay out index ``name`` where its storage table is already there though no
    index records it (its catalog row deleted by hand): the layout would be thrown away on
    the engine's bare "already exists" when it took the name."""
    if catalog.storage_exists(db, name):
        table = catalog.storage_relation(name)
        raise LoomStateError(
            f"the storage table {table} is there, but no index records it (its catalog row "
            "was deleted)",
            hint=f"drop it first if its rows are not needed: DROP TABLE {table}, or choose "
            "another name",
        )


def scratch(
    db: Database,
    source: str,
    label: str,
    opts: dict[str, Any],
    budget: int | None,
    what: str,
    quiet: bool = False,
    shared: bool = False,
    split: Any = None,
) -> Layout:
    """A layout for one train: in memory when the raw rows fit ``budget`` bytes, else in a
    temporary table (dropped with the session or by ``close``); ``budget`` None: always in a
    temporary table (a distributed train's driver, which reads it once to partition it and
    keeps no rows, whatever ``cache_mb``'s default); ``shared``: always in a table the
    engine's parallel workers can read (``storage.shared_scratch_relation``); of the rows
    ``split`` (a ``store.split.Split``) leaves for training where given."""
    fmt = formats.get(opts["format"])
    fmt.check(opts)
    grouped.check(opts)
    prof = fmt.profile(db, source, label, opts, split)
    info = _info("", prof, fmt, opts)
    progress = Progress(db, what, prof.rows, quiet)
    keyed = bool(opts.get("slimml"))
    if not shared and budget is not None and prof.raw_bytes <= budget:
        kept: list[tuple] = []
        _lay_out(db, info, prof, fmt, opts, kept.extend, progress, checked=False)
        memory = MemoryRows(kept)
        return Layout(info, fmt.bind(info), memory.read, by_group=memory if keyed else None)
    if not shared:
        progress.phase(_why_a_table(prof.raw_bytes, budget))
    make = storage.shared_scratch_relation if shared else storage.scratch_relation
    relation = make(db, info.uid)
    storage.create(db, relation, keyed=keyed)
    sink = partial(storage.write, db, relation)
    # a temporary table is private to this call (no checksums), a shared one is not
    _lay_out(db, info, prof, fmt, opts, sink, progress, checked=shared)
    reader = storage.Reader(db, relation, what, info.uid, fmt.version, None, checked=shared)
    layout = Layout(
        info,
        fmt.bind(info),
        _stored_reader(reader, info),
        by_group=reader if keyed else None,
        relation=relation,
    )
    layout.close = lambda: db.execute(f"DROP TABLE IF EXISTS {relation}")
    return layout


def _why_a_table(raw_bytes: int, budget: int | None) -> str:
    """Progress's word on a scratch layout going to a temporary table."""
    if budget is None:
        return (
            f"the rows ({in_mb(raw_bytes)} MB) go to a temporary table that the driver reads "
            "once to send each worker its partition; it keeps no rows in memory"
        )
    return (
        f"the rows take {in_mb(raw_bytes)} MB, more than cache_mb ({in_mb(budget)}): they "
        "go to a temporary table that every epoch reads back; "
        f'"cache_mb": {math.ceil(raw_bytes / MB)} or more keeps them in memory'
    )


class MemoryRows:
    """A scratch layout's stored rows kept in memory (written and read in this call)."""

    def __init__(self, rows: list[tuple]):
        self.by_batch: dict[int, storage.Stored] = {}
        self.points: dict[int, storage.Stored] = {}
        for batch, part, n, _version, payload, _crc in rows:
            if part == storage.SUMMARY_PART:
                self.points[batch] = storage.Stored(batch, n, [payload])
            else:
                self.by_batch.setdefault(batch, storage.Stored(batch, n, [])).parts.append(payload)

    def read(self, first: int, stop: int, parts: int) -> Iterator[storage.Stored]:
        return self.read_ids(range(first, stop), parts)

    def read_ids(self, ids: Sequence[int], parts: int) -> Iterator[storage.Stored]:
        for b in ids:
            s = self.by_batch[int(b)]
            yield storage.Stored(int(b), s.rows, s.parts[: parts + 1])

    def summaries(self, count: int) -> list[storage.Stored]:
        return [self.points[b] for b in range(count)]


def _stored_reader(reader: storage.Reader, info: IndexInfo):
    per_batch = info.bytes // max(info.batches, 1)

    def read(first: int, stop: int, parts: int) -> Iterator[storage.Stored]:
        total = 0
        for stored in reader.read(first, stop, parts, per_batch):
            total += stored.rows
            yield stored
        if first == 0 and stop == info.batches and total != info.rows:
            raise storage.damaged(reader.index, f"it holds {total} rows, not {info.rows}")

    return read


def open_index(db: Database, name: str, allow_stale: bool = False) -> Layout:
    """Index ``name`` from the catalog, refused when its source changed (unless allowed)."""
    _hold_storage(db, name)
    info = catalog.get_index(db, name)
    fmt = formats.get(info.format)
    if info.format_version != fmt.version:
        raise storage.damaged(
            name, f"it was laid out as {info.format} version {info.format_version}"
        )
    relation = catalog.storage_relation(name)
    if not catalog.storage_exists(db, name):  # dropped by hand: the engine's bare error
        raise storage.damaged(name, f"its storage table {relation} is gone")
    if not allow_stale:
        check_fresh(db, info)
    reader = storage.Reader(db, relation, name, info.uid, fmt.version, info.owner)
    keyed = bool(info.options.get("slimml"))
    return Layout(
        info,
        fmt.bind(info),
        _stored_reader(reader, info),
        by_group=reader if keyed else None,
        relation=relation,
        owner=info.owner,
    )


def _hold_storage(db: Database, name: str) -> None:
    """PostgreSQL: lock index ``name``'s storage table against a rebuild or a drop before its
    catalog row is read, until the reading transaction ends.  Each statement there sees what
    was committed when it began: a rebuild committed between the row's read and the table's
    would pair the old row with the new table (whose checksums are over the new index's
    identity: the index read as damaged).  Locked first, a rebuild under way is waited for and
    then both are the new index's; one that comes later waits for this reader.  DuckDB reads
    a call's rows in one snapshot.  No such table, or not this role's: the row's read says."""
    if db.dialect != "postgres":
        return
    with contextlib.suppress(LoomError):
        db.execute(f"LOCK TABLE {catalog.storage_relation(name)} IN ACCESS SHARE MODE")


def _source_gone(db: Database, info: IndexInfo, error: LoomNotFoundError) -> LoomNotFoundError:
    """``error`` (the source cannot be read) with a hint to rebuild index ``info``: its table
    was renamed, moved to another schema or dropped since it was built."""
    relation = catalog.index_relation(db, info.name)
    if relation is not None:  # psql's CREATE INDEX … USING: the relation follows its table
        hint = (
            f"its table was renamed or moved since it was built: REINDEX INDEX {relation} "
            "builds it again from the table under its name now"
        )
    else:
        hint = (
            f"{info.table} was renamed, moved or dropped since index '{info.name}' was built: "
            f"loom_drop_index('{info.name}'), then loom_create_index it again on the table's "
            "name now"
        )
    return LoomNotFoundError(error.message, hint=hint, detail=error.detail)


def _source_kinds(db: Database, info: IndexInfo) -> dict[str, str]:
    """The kinds of the columns index ``info``'s source has now; its table gone (renamed,
    moved, dropped) is an error saying so and how to build the index again."""
    from loomdb.store.source import columns_of

    try:
        return columns_of(db, info.table)[1]
    except LoomNotFoundError as e:
        raise _source_gone(db, info, e) from None


def _lost_columns(db: Database, info: IndexInfo, kinds: dict[str, str]) -> list[str]:
    """The columns index ``info`` was built on that its source no longer has (dropped,
    renamed), names compared as the engine compares them (``Database.fold_name``: on
    PostgreSQL ``"X"`` and ``"x"`` are two columns)."""
    present = {db.fold_name(c) for c in kinds}
    built = [*feature_columns(info), info.label]
    return [c for c in built if db.fold_name(c) not in present]


def check_fresh(db: Database, info: IndexInfo, stale_option: bool = True) -> None:
    """Refuse index ``info`` once its source changed (``stale_option``: whether the hint may
    offer ``{"allow_stale": true}``, which only loom_train takes)."""
    stale = ', or pass {"allow_stale": true} to train on it as it is' if stale_option else ""

    with db.as_role(info.owner):
        kinds = _source_kinds(db, info)
        # a column the index was built on that the source no longer has (dropped, renamed)
        # changed the source as surely as an UPDATE; the fingerprint's query could not name it
        gone = _lost_columns(db, info, kinds)
        if gone:
            raise LoomStateError(
                f"index '{info.name}' is older than the last change to {info.source}: its "
                f"column(s) {', '.join(repr(c) for c in gone)} are no longer there",
                hint=f"build it again on the columns {info.source} has now "
                f"(loom_reindex('{info.name}') rebuilds the same columns, once they are back)"
                + stale,
            )
        _check_kinds(db, info, kinds, stale)
        if _same_versions(db, info):
            return
        now = _signature(db, info, kinds, info.source_signature)
    if now != info.source_signature:
        raise LoomStateError(
            f"index '{info.name}' is older than the last change to {info.source}",
            hint=f"rebuild it with loom_reindex('{info.name}')" + stale,
        )


def _same_versions(db: Database, info: IndexInfo) -> bool:
    """Whether the source's table holds the very row versions and columns it held when the
    index's fingerprint was recorded, so that the fingerprint is the same without hashing
    every value (PostgreSQL: 10M rows × 21 columns, 3.3 s of every train).  A table that
    changed and changed back (an UPDATE to the same values, VACUUM FULL, a dump restored)
    falls to the fingerprint, which still finds it fresh."""
    recorded = info.stats.get("versions")
    table = _versions_table(db, info)
    return bool(recorded) and table is not None and db.row_versions(table) == recorded


def _check_kinds(db: Database, info: IndexInfo, kinds: dict[str, str], stale: str) -> None:
    """Refuse index ``info`` when a column it read has another kind than when it was built
    (ALTER TABLE … TYPE VARCHAR): the fingerprint hashes a column read as a double, and a
    column of numbers turned to text reads back as the same doubles.  Indexes recorded before
    their columns' kinds were are checked by the fingerprint alone."""
    now = {db.fold_name(c): k for c, k in kinds.items()}
    built = info.stats.get("kinds") or {}
    changed = [
        f"'{c}' ({k} → {now[key]})"
        for c, k in built.items()
        if (key := db.fold_name(c)) in now and now[key] != k
    ]
    if changed:
        raise LoomStateError(
            f"index '{info.name}' is older than the last change to {info.source}: its "
            f"column(s) {', '.join(changed)} changed type",
            hint=f"rebuild it with loom_reindex('{info.name}')" + stale,
        )


def drop(db: Database, name: str) -> str | None:
    """Drop index ``name``'s storage table and catalog row; what was damaged in its catalog row
    (a damaged row is dropped all the same, read for its owner alone), or None."""
    try:
        owner, damage = catalog.get_index(db, name).owner, None
    except LoomFormatError as e:
        if not catalog.index_exists(db, name):
            raise
        found = catalog.row_owner(db, "indexes", name)
        owner, damage = (found[0] if found else None), str(e)
    with db.as_role(owner):
        db.execute(f"DROP TABLE IF EXISTS {catalog.storage_relation(name)}")
    catalog.delete_index(db, name)
    return damage


def rebuild(db: Database, name: str, what: str) -> IndexInfo:
    """Lay index ``name`` out again from its source, as its owner, with the same options."""
    info = catalog.get_index(db, name)
    fmt = formats.get(info.format)
    given = {k: v for k, v in info.options.items() if k in options_of(fmt).names()}
    features = feature_columns(info)
    opts = options_of(fmt).parse({**given, "features": features, "format": fmt.name})
    try:
        with db.as_role(info.owner):
            _refuse_lost_columns(db, info)
            return build(
                db, name, info.table, info.label, opts, what, replacing=True, shown=info.source
            )
    except LoomDataError as e:
        hint = _rebuild_hint(db, info, e.hint)
        if hint is None:
            raise
        e.hint = hint
        raise


def _rebuild_hint(db: Database, info: IndexInfo, hint: str | None) -> str | None:
    """The hint for a rebuild of an error whose ``hint`` offers an option: a rebuild takes
    none, it keeps the index's own (None: ``hint`` stands as it is)."""
    name = info.name
    if hint == NULLS_HINT:
        return (
            f"index {name} was built to refuse NULLs and a rebuild keeps its options: fill "
            "them in, or build it again skipping (and counting) them: loom_drop_index, then "
            'loom_create_index with {"nulls": "skip"} (for an index made by CREATE INDEX … '
            "USING: ALTER INDEX … SET (nulls = skip), then REINDEX INDEX)"
        )
    if hint != sparse.WIDTH_HINT:
        return None
    width = (info.options.get("sparse") or {}).get("width")
    relation = catalog.index_relation(db, name)
    if relation is not None:  # its build reads the relation's WITH options, not the catalog's
        return (
            f"index {name} lays its rows out over the {width} columns it recorded: "
            f"REINDEX INDEX {relation} lays it out again from its WITH options"
        )
    return (
        f"index {name} lays its rows out over {width} columns and a rebuild keeps its "
        f"options: build it again over the columns the source has now: "
        f"loom_drop_index('{name}'), then loom_create_index leaving out the sparse "
        "option's \"width\" (the rows' largest index + 1), or giving a larger one"
    )


def _refuse_lost_columns(db: Database, info: IndexInfo) -> None:
    """A rebuild lays out the very columns index ``info`` was built on: refuse it, saying what
    to do instead, when its table or one of those columns is gone (by the engine's rules for
    names: on PostgreSQL a column ``"x"`` does not stand in for a dropped ``"X"``)."""
    gone = _lost_columns(db, info, _source_kinds(db, info))
    if not gone:
        return
    relation = catalog.index_relation(db, info.name)
    if relation is not None:  # psql's CREATE INDEX … USING: the relation follows renames
        hint = (
            f"REINDEX INDEX {relation} builds it on its columns as they are named now "
            f"(ALTER INDEX {relation} SET (label = …) first where the label was renamed)"
        )
    else:
        hint = (
            f"build it again on the columns {info.source} has now: loom_drop_index("
            f"'{info.name}'), then loom_create_index"
        )
    raise LoomNotFoundError(
        f"index '{info.name}' cannot be rebuilt: {info.source} no longer has its column(s) "
        f"{', '.join(repr(c) for c in gone)}, and a rebuild lays out the columns it was "
        "built on",
        hint=hint,
    )
