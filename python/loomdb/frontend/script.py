"""Split a SQL script into statements with sqlglot's tokenizer, keeping each one's own text.

Statements loomdb does not own are handed to the engine exactly as written (never sqlglot's
regenerated text), so engine-specific syntax is never altered.  psql meta-commands (lines that
start with a backslash, such as ``\\echo``) are dropped.
"""

from __future__ import annotations

import re

from sqlglot.dialects.dialect import Dialect
from sqlglot.tokens import Token, TokenType

META = re.compile(r"^\s*\\.*$", re.MULTILINE)


def tokens(text: str, dialect: str) -> list[Token]:
    return list(Dialect.get_or_raise(dialect).tokenizer_class().tokenize(text))


def split(text: str, dialect: str) -> list[tuple[str, list[Token]]]:
    """``(statement text, its tokens)`` for every non-empty statement of ``text``."""
    text = META.sub("", text)
    try:
        toks = tokens(text, dialect)
    except Exception:  # a script sqlglot cannot tokenize goes to the engine whole
        return [(text.strip(), [])] if text.strip() else []
    out: list[tuple[str, list[Token]]] = []
    current: list[Token] = []
    for tok in [*toks, None]:
        if tok is None or tok.token_type == TokenType.SEMICOLON:
            if current:
                out.append((text[current[0].start : current[-1].end + 1], current))
            current = []
        else:
            current.append(tok)
    return out
