"""Split a SQL script into statements with sqlglot's tokenizer, keeping each one's own text.
No paper section.

A statement is the original text from its first token to its last one, so quotes, dollar
quotes (``$$ … $$``, ``$tag$ … $tag$``), comments and engine-specific syntax reach the engine
exactly as written; comments before a statement and empty statements (``;;``) are dropped.

psql meta-commands — a line whose first non-blank character is a backslash, outside any quote
— are read as psql reads them (a command's arguments end at the line's end or at the next
unquoted backslash, which begins another command; SQL after ``\\\\`` on the line is SQL) and
honoured or refused, never dropped where dropping would change which SQL runs or on what:
those that only show something (``\\echo``, ``\\timing``, ``\\pset``, ``\\x``, ``\\d…``) and
``\\set ON_ERROR_STOP on`` (loomdb's way already) are skipped, the statement around them going
on as in psql; ``\\g`` and ``\\gx`` without arguments end the statement before them, as ``;``
does; ``\\q`` ends the script; every other one (``\\c``, ``\\copy``, ``\\i``, ``\\set``,
``\\gexec``, ``\\if``…) is refused with a :class:`LoomSyntaxError` naming its line.  A script
the tokenizer cannot read (an unterminated quote or comment) is handed to the engine whole from
that point on, so that the engine reports the error.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from loomdb.errors import LoomSyntaxError

DIALECTS = ("duckdb", "postgres")

# psql meta-commands that only show something (or change how results look): skipped
SHOWN = frozenset({
    "echo", "qecho", "warn", "timing", "pset", "x", "a", "t", "T", "H", "f", "C", "conninfo",
    "p", "print", "errverbose", "copyright", "?", "h", "help", "l", "l+", "list", "list+", "z",
    "z+", "sf", "sf+", "sv", "sv+",
})  # fmt: skip
DESCRIBE = re.compile(r"d[A-Za-z]*\+?")  # \d, \dt+, \di, \dx…: psql's catalog listings
SENDS = frozenset({"g", "gx"})  # without arguments: send the statement before them, as ";"
QUITS = frozenset({"q", "quit"})
TRUE = frozenset({"on", "true", "yes", "1", "t", "y"})
# a command's words: "\\" (what follows is SQL), a command's name, a quoted or bare argument
WORD = re.compile(
    r"""(?P<sql>\\\\)|(?P<name>\\[^\s\\]*)|'(?:[^'\\]|\\.|'')*'?|"(?:[^"]|"")*"?|`[^`]*`?"""
    r"""|[^\s\\'"`]+"""
)
HINTS = {
    "c connect": "run one script per database (loomdb sql --dsn '… dbname=other' -f part.sql), "
    "or name the other database's objects in the SQL where the engine allows it",
    "copy": "load the file with SQL: COPY … FROM 'file' (read by the server), "
    "loom_load('libsvm', path, table), or loomdb load KIND PATH TABLE from this machine",
    "i include ir include_relative": "run the included script on its own first "
    "(loomdb sql -f it), or paste its statements here",
    "set unset gset prompt getenv setenv": "write the values into the statements: loomdb "
    "substitutes no psql variables (:name)",
    "if elif else endif": "keep the statements of the branch to run",
    "o out w write s": "redirect loomdb sql's output instead: loomdb sql … > file",
    "g gx": "end the statement with ; (loomdb sql prints every result: redirect its output, "
    "loomdb sql … > file, for what \\g FILE writes)",
    "gexec": "write the statements its query would make into the script",
}
OTHER = (
    "remove it, or run the script with psql: loomdb skips only meta-commands that show "
    "something (\\echo, \\timing, \\pset, \\x, \\d…) and \\set ON_ERROR_STOP on"
)


def tokenize(text: str, dialect: str) -> list[Token]:
    """sqlglot's tokens of ``text``; raises ``sqlglot.errors.TokenError`` on unreadable text."""
    return list(Dialect.get_or_raise(dialect).tokenizer_class().tokenize(text))


def _meta_command_lines(text: str) -> Iterator[tuple[int, int, int]]:
    """``(number, start, end)`` of every line that starts with a backslash (it may be inside a
    quote), numbered from 1."""
    start = 0
    for number, line in enumerate(text.splitlines(keepends=True), 1):
        if line.lstrip(" \t").startswith("\\"):
            yield number, start, start + len(line)
        start += len(line)


def _lexes(text: str, dialect: str) -> bool:
    try:
        tokenize(text, dialect)
    except TokenError:
        return False
    return True


def _pending(text: str, dialect: str) -> bool:
    """Whether ``text`` ends in a statement no semicolon ended yet (psql's query buffer)."""
    try:
        tokens = tokenize(text, dialect)
    except TokenError:
        return True
    return bool(tokens) and tokens[-1].token_type != TokenType.SEMICOLON


def _statements(text: str, dialect: str) -> list[str]:
    """The statements of ``text`` (no meta-commands in it), split at top-level semicolons."""
    try:
        tokens = tokenize(text, dialect)
    except TokenError:
        return [text.strip()] if text.strip() else []
    out: list[str] = []
    current: list[Token] = []
    for token in [*tokens, None]:
        if token is None or token.token_type == TokenType.SEMICOLON:
            if current:
                # a COMMAND's tail token may end on trailing blanks: strip them
                out.append(text[current[0].start : current[-1].end + 1].strip())
            current = []
        else:
            current.append(token)
    return out


def _commands(line: str) -> tuple[list[list[str]], int]:
    """The meta-commands of a line that starts with one, each as its words (its name without
    the backslash first, arguments unquoted), and where SQL after a ``\\\\`` begins (the line's
    length where none does)."""
    commands: list[list[str]] = []
    for word in WORD.finditer(line):
        if word["sql"]:
            return commands, word.end()
        if word["name"]:
            commands.append([word["name"][1:]])
        elif commands:
            text = word[0]
            quoted = len(text) > 1 and text[0] in "'\"`" and text[-1] == text[0]
            commands[-1].append(text[1:-1] if quoted else text)
    return commands, len(line)


def _refused(number: int, words: list[str], why: str = "", hint: str = "") -> LoomSyntaxError:
    name = words[0]
    shown = " ".join(["\\" + name, *words[1:2]])
    hint = hint or next((h for names, h in HINTS.items() if name in names.split()), OTHER)
    return LoomSyntaxError(
        f"line {number}: psql's meta-command {shown} "
        + (why or "is not run by loomdb, and skipping it would change what the script does"),
        hint=hint,
    )


def _act(words: list[str], kept: str, number: int, dialect: str) -> str | None:
    """What the SQL so far (``kept``) becomes after meta-command ``words`` on line ``number``:
    itself (a command that only shows something), ended by a ";" (``\\g``), or None where the
    script ends (``\\q``); a LoomSyntaxError for every other command."""
    name, args = words[0], words[1:]
    if name in SHOWN or DESCRIBE.fullmatch(name):
        return kept
    if name == "set" and args[:1] == ["ON_ERROR_STOP"]:
        if len(args) == 2 and args[1].lower() in TRUE:
            return kept  # loomdb sql stops at the first error already
        raise _refused(
            number, words, "is not run by loomdb", "loomdb sql --keep-going runs every statement"
        )
    if name in SENDS and not args:
        if not _pending(kept, dialect):
            raise _refused(
                number,
                words,
                "has no statement before it: psql would run the previous one again",
                "write that statement again, ended by ;",
            )
        return kept + ";"
    if name in QUITS:
        if _pending(kept, dialect):
            raise _refused(
                number,
                words,
                "follows a statement with no ; that psql would not run",
                "end the statement with ; to run it, or remove it",
            )
        return None
    raise _refused(number, words)


def plain(sql: str) -> bool:
    """Whether ``sql`` is at most one statement that :func:`split` gives back stripped, known
    without tokenizing it: no semicolon, comment or backslash.  sqlglot's tokenizer is Python:
    splitting and rewriting a compiled model's expression (1.8 kB) took 2.4 ms, paid by every
    statement run on loomdb's DuckDB connection."""
    return not any(mark in sql for mark in (";", "--", "/*", "\\"))


def split(sql: str, dialect: str = "postgres") -> list[str]:
    """The statements of a script, each as its original text, psql's meta-commands honoured
    or refused (see the module's doc).

    >>> split("\\\\echo hi\\nSELECT 'a;b'; -- done\\nSELECT 2;;")
    ["SELECT 'a;b'", 'SELECT 2']
    """
    kept = ""  # the SQL read so far, without its meta-commands
    piece_start = 0
    for number, start, end in _meta_command_lines(sql):
        before = sql[piece_start:start]
        # the backslash is outside every quote and comment exactly when the text before it lexes
        if start < piece_start or not _lexes(before, dialect):
            continue
        commands, sql_at = _commands(sql[start:end])
        now = kept + before
        for words in commands:
            after = _act(words, now, number, dialect)
            if after is None:  # \q: the script ends here
                return _statements(now, dialect)
            now = after
        kept, piece_start = now + "\n", start + sql_at
    return _statements(kept + sql[piece_start:], dialect)
