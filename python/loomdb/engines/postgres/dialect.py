"""PostgreSQL's spelling of what the store needs: types, type classes, packed row reads.
No paper section."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from loomdb.csr import CsrRows
from loomdb.errors import LoomDataError, LoomFormatError

PG_TYPES = {
    "text": "text",
    "double": "double precision",
    "double[]": "double precision[]",
    "integer[]": "integer[]",
    "bigint[]": "bigint[]",
    "bigint": "bigint",
    "integer": "integer",
    "smallint": "smallint",
    "boolean": "boolean",
    "bytes": "bytea",
    "timestamp": "timestamptz",
}

NUMERIC_OIDS = {20, 21, 23, 700, 701, 1700}  # int8 int2 int4 float4 float8 numeric
BOOL_OID = 16
INTEGER_ARRAY_OIDS = {1005, 1007, 1016}  # int2[] int4[] int8[]
NUMBER_ARRAY_OIDS = {1021, 1022, 1231}  # float4[] float8[] numeric[]
BYTEA_OID = 17
TEXT_OIDS = {25, 1043}  # text varchar (not char(n): its padding differs once read as JSON)
FLOAT8_OID = 701
ARRAY_HEADER = 20  # ndim, flags, element type, dimension, lower bound: 5 × int4


def _int8(value: int) -> str:
    """An integer as a bigint constant: a bare literal is an int4, which would make a call of
    pg_catalog's function taking bigint need a cast, and so lose to another role's exact
    overload anywhere on the search_path (CVE-2018-1058)."""
    return f"CAST({int(value)} AS pg_catalog.int8)"


def _OP(operator: str) -> str:
    """pg_catalog's ``operator``, never one found on the search_path."""
    return f"OPERATOR(pg_catalog.{operator})"


def type_name(abstract: str) -> str:
    return PG_TYPES[abstract]


def column_kind(oid: int) -> str:
    """numeric | boolean | bytes | text | integer[] | double[] | other
    (``store.db.Queryable.columns``)."""
    if oid in NUMERIC_OIDS:
        return "numeric"
    if oid in TEXT_OIDS:
        return "text"
    if oid in (BOOL_OID, BYTEA_OID):
        return "boolean" if oid == BOOL_OID else "bytes"
    if oid in INTEGER_ARRAY_OIDS:
        return "integer[]"
    return "double[]" if oid in NUMBER_ARRAY_OIDS else "other"


def param_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "bigint"
    if isinstance(value, float):
        return "double precision"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "bytea"
    if isinstance(value, (list, tuple)):
        return "double precision[]"
    return "text"


def array_rows(
    relation: str, columns: Sequence[str], types: Sequence[str], rows: Sequence[Sequence[Any]]
) -> tuple[str, list[str], list[Any]]:
    """``(sql, parameter types, parameters)`` inserting ``rows`` in one statement, some of whose
    columns (typed ``… []``) hold arrays: such a column travels as one flat array of every
    row's elements plus each row's offset and length (NULL: a NULL array), and each row takes
    its slice — one statement per page instead of one per row, and rows stay in order."""
    kinds: list[str] = []
    params: list[Any] = []
    unnested: list[str] = []  # the per-row parameters, as "$k::type"
    fields: list[str] = []
    selected: list[str] = []

    def param(kind: str, value: Any) -> str:
        kinds.append(kind)
        params.append(value)
        return f"${len(params)}::{kind}"

    for i, typ in enumerate(types):
        values = [r[i] for r in rows]
        if not typ.endswith("[]"):
            unnested.append(param(typ + "[]", values))
            fields.append(f"c{i}")
            selected.append(f"loom_u.c{i}")
            continue
        starts: list[int | None] = []
        lengths: list[int | None] = []
        flat: list[Any] = []
        for v in values:
            starts.append(None if v is None else len(flat))
            lengths.append(None if v is None else len(v))
            flat.extend(v or ())
        elements = param(typ, flat)
        unnested += [param("bigint[]", starts), param("bigint[]", lengths)]
        fields += [f"o{i}", f"n{i}"]
        o, n = f"loom_u.o{i}", f"loom_u.n{i}"
        selected.append(
            f"CASE WHEN {n} IS NULL THEN NULL ELSE ({elements})[{o} {_OP('+')} {_int8(1)} : "
            f"{o} {_OP('+')} {n}] END"
        )
    sql = (
        f"INSERT INTO {relation} ({', '.join(columns)}) SELECT {', '.join(selected)} "
        f"FROM {rows_from(unnested, fields)}"
    )
    return sql, kinds, params


def rows_from(arrays: Sequence[str], fields: Sequence[str]) -> str:
    """``arrays`` (SQL expressions) side by side as the rows of ``loom_u(fields)`` (a shorter
    array padded with NULLs, as ``unnest(a, b, …)``).  Each ``unnest`` is pg_catalog's: an
    unqualified ``unnest`` of one array would be another role's ``unnest`` of that exact
    array type wherever one is on the search_path (pg_catalog's is polymorphic)."""
    calls = ", ".join(f"pg_catalog.unnest({a})" for a in arrays)
    return f"ROWS FROM ({calls}) AS loom_u({', '.join(fields)})"


def shuffle_key(row_number: str, seed: int) -> str:
    return f"pg_catalog.hashint8extended({row_number}, {_int8(seed)}), {row_number}"


def _chunked(
    relation: str, where: str | None, seed: int | None, chunk: int, rows: int | None
) -> tuple[str, str]:
    """``(FROM, ORDER)`` of a packed read: FROM yields ``relation``'s rows with their chunk
    ``loom_g`` (ascending in read order), ORDER orders a chunk's rows.  Stored order: chunks of
    ``chunk`` consecutive rows.  Shuffled (``shuffle_key``'s order): a chunk is a value of the
    key's top bits, as many bits as make ``rows`` (the rows read) into chunks of about ``chunk``
    (chunk/2 to chunk on average), so the one sort the read needs is GROUP BY's, and the order
    within a chunk is a sort of its rows in memory.  The order the chunks spell out is the
    key's, whatever ``rows`` and ``chunk``: numbering rows by the key in a window and cutting
    those numbers took a second sort of every row, a quarter of the read (measured: 1M × 21,
    3.8 s → 2.8 s)."""
    filtered = f" WHERE {where}" if where else ""
    numbered = f"SELECT *, pg_catalog.row_number() OVER () AS loom_rn FROM {relation}{filtered}"
    if seed is None:
        cut = (
            f"SELECT *, (loom_rn {_OP('-')} {_int8(1)}) {_OP('/')} {_int8(chunk)} AS loom_g "
            f"FROM ({numbered}) loom_a"
        )
        return f"({cut})", "loom_rn"
    if rows is None:
        raise ValueError("a shuffled read needs the number of rows it returns")
    bits = min(63, math.ceil(math.log2(max(rows, 1) / chunk)))
    # rows ≤ chunk: one chunk
    group = f"loom_h {_OP('>>')} CAST({64 - bits} AS pg_catalog.int4)" if bits > 0 else "0"
    hashed = (
        f"SELECT *, pg_catalog.hashint8extended(loom_rn, {_int8(seed)}) AS loom_h "
        f"FROM ({numbered}) loom_a"
    )
    return f"(SELECT *, {group} AS loom_g FROM ({hashed}) loom_b)", "loom_h, loom_rn"


def packed_rows_query(
    relation: str,
    columns: Sequence[str],
    where: str | None,
    seed: int | None,
    chunk: int,
    rows: int | None,
) -> str:
    """One bytea per chunk of rows (``_chunked``): each row's values as
    ``array_send(float8[])``."""
    values = ", ".join(f"CAST({c} AS pg_catalog.float8)" for c in columns)
    source, order = _chunked(relation, where, seed, chunk, rows)
    return (
        f"SELECT pg_catalog.string_agg(pg_catalog.array_send(CAST(ARRAY[{values}] AS "
        f"pg_catalog.float8[])), CAST('' AS pg_catalog.bytea) ORDER BY {order}) "
        f"FROM {source} loom_c GROUP BY loom_g ORDER BY loom_g"
    )


def packed_sparse_query(
    relation: str,
    label: str,
    indices: str,
    values: str,
    where: str | None,
    seed: int | None,
    chunk: int,
    rows: int | None,
) -> str:
    """Two bytea per chunk of rows (``_chunked``): ``heads``, each row's label (float8) and the
    byte lengths of its two arrays (int4, int4), and ``bodies``, each row's
    ``array_send(int4[])`` then ``array_send(float8[])``."""
    source, order = _chunked(relation, where, seed, chunk, rows)
    cat, empty = _OP("||"), "CAST('' AS pg_catalog.bytea)"
    return (
        f"SELECT pg_catalog.string_agg(pg_catalog.float8send(loom_l) {cat} "
        f"pg_catalog.int4send(pg_catalog.octet_length(loom_i)) {cat} "
        f"pg_catalog.int4send(pg_catalog.octet_length(loom_v)), {empty} "
        f"ORDER BY {order}) AS heads, "
        f"pg_catalog.string_agg(loom_i {cat} loom_v, {empty} ORDER BY {order}) AS bodies FROM ("
        f"SELECT CAST({label} AS pg_catalog.float8) AS loom_l, "
        f"pg_catalog.array_send(CAST({indices} AS pg_catalog.int4[])) AS loom_i, "
        f"pg_catalog.array_send(CAST({values} AS pg_catalog.float8[])) AS loom_v, loom_g, {order} "
        f"FROM {source} loom_c) loom_d GROUP BY loom_g ORDER BY loom_g"
    )


HEAD = np.dtype([("label", ">f8"), ("ni", ">i4"), ("nv", ">i4")])


def _elements(words: np.ndarray, starts: np.ndarray, n: np.ndarray, size: int) -> np.ndarray:
    """The elements of one-dimensional ``array_send`` blobs starting at byte ``starts`` with
    ``n`` elements of ``size`` (4 or 8) bytes, each after its 4-byte length.  Every blob starts
    at a multiple of 4 bytes (its header and elements are whole words), so the body is read as
    big-endian 32-bit words: int4 elements are one word, float8 elements two."""
    step = (size + 4) // 4
    first = (starts + 24) // 4 - step * np.concatenate([[0], np.cumsum(n)[:-1]]).astype(np.int64)
    at = np.repeat(first, n) + step * np.arange(int(n.sum()))
    if size == 4:
        return words[at].view(">i4").astype(np.int64)
    high, low = words[at].astype(np.uint64), words[at + 1].astype(np.uint64)
    return ((high << np.uint64(32)) | (low & np.uint64(0xFFFFFFFF))).view(np.float64)


def decode_packed_sparse(heads: bytes, bodies: bytes, width: int) -> tuple[np.ndarray, CsrRows]:
    """Rows packed by :func:`packed_sparse_query` → ``(labels, CsrRows)``."""
    if len(heads) % HEAD.itemsize:
        raise LoomFormatError(f"packed sparse heads of {len(heads)} bytes are not whole rows")
    head = np.frombuffer(heads, dtype=HEAD)
    if len(bodies) % 4:
        raise LoomFormatError("packed sparse rows are not whole 32-bit words")
    words = np.frombuffer(bodies, dtype=">u4")
    ni, nv = head["ni"].astype(np.int64), head["nv"].astype(np.int64)
    starts = np.concatenate([[0], np.cumsum(ni + nv)[:-1]]).astype(np.int64)
    if int((ni + nv).sum()) != len(bodies) or ((ni | nv) % 4).any():
        raise LoomFormatError("packed sparse rows do not add up to their bodies")
    ndim_i = words[starts // 4].astype(np.int64)
    n = np.where(ndim_i == 1, words[np.minimum(starts // 4 + 3, len(words) - 1)], 0).astype(
        np.int64
    )
    if (ndim_i > 1).any() or (words[(starts + ni) // 4] > 1).any():
        raise LoomDataError(
            "a sparse row holds a multi-dimensional array",
            hint="indices and values must be one-dimensional arrays",
        )
    empty = n == 0
    if not (
        np.array_equal(ni, np.where(empty, 12, 20 + 8 * n))
        and np.array_equal(nv, np.where(empty, 12, 20 + 12 * n))
    ):
        raise LoomDataError(
            "a row's indices and values arrays have different lengths or NULL elements",
            hint="each index needs exactly one value, and neither may be NULL",
        )
    indptr = np.zeros(len(n) + 1, dtype=np.int64)
    np.cumsum(n, out=indptr[1:])
    indices = _elements(words, starts, n, 4)
    values = _elements(words, starts + ni, n, 8)
    return head["label"].astype(np.float64), CsrRows(indptr, indices, values, width)


def rows_query(relation: str, columns: Sequence[str], where: str | None, seed: int | None) -> str:
    """The values of ``columns`` (SQL expressions), in the order of :func:`packed_rows_query`."""
    values = ", ".join(f"{c} AS loom_c{i}" for i, c in enumerate(columns))
    order = shuffle_key("loom_rn", seed) if seed is not None else "loom_rn"
    filtered = f" WHERE {where}" if where else ""
    return (
        f"SELECT {values} FROM (SELECT *, pg_catalog.row_number() OVER () AS loom_rn "
        f"FROM {relation}{filtered}) loom_a ORDER BY {order}"
    )


RECORD_HASH = "record:"  # how a fingerprint made by hash_record_extended begins
COLUMN_HASH = "columns:"  # how a fingerprint made of each value's own hash begins
TEXT_HASH = ""  # the earliest: the row's text hashed (no prefix)
#: the hash function of a column's type (by OID), called on the value with a seed of its own
TYPED_HASH = {
    701: "pg_catalog.hashfloat8extended",
    700: "pg_catalog.hashfloat4extended",
    20: "pg_catalog.hashint8extended",
    23: "pg_catalog.hashint4extended",
    21: "pg_catalog.hashint2extended",
    # arrays
    **dict.fromkeys((1022, 1021, 1016, 1007, 1005, 1231), "pg_catalog.hash_array_extended"),
}


def hashing(like: str | None) -> str:
    """How to fingerprint a source to compare with ``like`` (None: a new fingerprint)."""
    if like is None or like.startswith(COLUMN_HASH):
        return COLUMN_HASH
    return RECORD_HASH if like.startswith(RECORD_HASH) else TEXT_HASH


def signature_query(
    relation: str,
    columns: Sequence[str],
    where: str | None,
    how: str = COLUMN_HASH,
    types: Sequence[int] = (),
) -> str:
    """The count and hash sum of the rows' ``columns`` (SQL expressions of PostgreSQL type
    OIDs ``types``), hashed ``how``:

    - ``COLUMN_HASH``: each value by its type's own hash function (``TYPED_HASH``; any other
      type as a one-field record), seeded by its place, and the row's hash their XOR — 2.1–3.0 s
      for 10M rows × 21 columns here, where the record below took 5.2–6.0 s (the row is never
      formed as a record);
    - ``RECORD_HASH``: the row hashed as a record (``hash_record_extended``), which earlier
      versions recorded;
    - ``TEXT_HASH``: the row's text hashed, which the earliest recorded (28 s).

    All see every change of a value but a float's −0 to 0 (equal values, the same training),
    and a value's move to another row or column; a NULL hashes to a constant of its place."""
    row = f"ROW({', '.join(columns)})"
    if how == COLUMN_HASH:
        hashed = f" {_OP('#')} ".join(
            _value_hash(c, t, i) for i, (c, t) in enumerate(zip(columns, types))
        )
    elif how == RECORD_HASH:
        hashed = f"pg_catalog.hash_record_extended({row}, {_int8(0)})"
    else:
        hashed = f"pg_catalog.hashtextextended(CAST({row} AS pg_catalog.text), {_int8(0)})"
    filtered = f" WHERE {where}" if where else ""
    return (
        f"SELECT pg_catalog.count(*) AS n, pg_catalog.sum({hashed}) AS total "
        f"FROM {relation}{filtered}"
    )


#: How a token of a table's row versions begins (``PlpyDatabase.row_versions``)
VERSIONS = "versions:"
#: Types below this OID are PostgreSQL's own: a role cannot change how their values read
FIRST_USER_OID = 16384
#: Collations under which equal means byte-equal (none, the default, "C", "POSIX"): a text's
#: category, bucket and class read the same for as long as its bytes stay
DETERMINISTIC = frozenset({0, 100, 950, 951})
#: The relation's kind, whether it has children, and its columns ($1: its name); pg_catalog's
#: operators on exact types (``oid = regclass`` would pick another role's exact overload)
VERSIONED_COLUMNS = (
    "SELECT c.relkind, c.relhassubclass, a.attnum, a.attname, a.atttypid, a.atttypmod, "
    "a.attcollation "
    "FROM pg_catalog.pg_class c JOIN pg_catalog.pg_attribute a "
    f"ON a.attrelid {_OP('=')} c.oid "
    f"WHERE c.oid {_OP('=')} pg_catalog.to_regclass($1)::pg_catalog.oid "
    f"AND a.attnum {_OP('>')} CAST(0 AS pg_catalog.int2) AND NOT a.attisdropped "
    "ORDER BY a.attnum"
)


def versions_query(relation: str) -> str:
    """The count and hash sum of the visible row versions of table ``relation``: each is
    named by its table, place and inserting transaction (``tableoid``, ``ctid``, ``xmin``),
    which an INSERT, UPDATE (HOT or not), DELETE, TRUNCATE or rewrite cannot leave as they
    were, and none of its values is read."""
    version = f"pg_catalog.hash_record_extended(ROW(tableoid, ctid, xmin), {_int8(0)})"
    return f"SELECT pg_catalog.count(*) AS vn, pg_catalog.sum({version}) AS vtotal FROM {relation}"


def _value_hash(expr: str, oid: int, seed: int) -> str:
    function = TYPED_HASH.get(int(oid))
    if function is None:  # NULL included
        return f"pg_catalog.hash_record_extended(ROW({expr}), {_int8(seed)})"
    return f"COALESCE({function}({expr}, {_int8(seed)}), {_int8(-1 - seed)})"


def decode_packed_rows(blob: bytes, m: int) -> np.ndarray:
    """Rows packed by :func:`packed_rows_query` → float64 (rows, m)."""
    row = np.dtype(
        [("header", f"V{ARRAY_HEADER}"), ("items", [("len", ">i4"), ("v", ">f8")], (m,))]
    )
    if len(blob) % row.itemsize:
        raise LoomFormatError(f"packed rows of {len(blob)} bytes do not hold whole {m}-value rows")
    rows = np.frombuffer(blob, dtype=row)
    return rows["items"]["v"].astype(np.float64)
