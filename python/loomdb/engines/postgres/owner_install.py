"""Acting as an index's owner in a security-restricted operation (``index_am/loomdb_owner.c``,
the ``loomdb_owner`` library, built beside ``loomdb_am``): the install script's part.
No paper section.

Created only where its library is installed (inside the access methods' ``DO`` block,
``index_am_install``): ``loom._owner_begin(name)`` and ``loom._owner_end(bigint)``, which
``PlpyDatabase.as_role`` uses to run SQL another role owns.  Without them, loomdb refuses to run
another role's SQL (a superuser acting on another role's index): under ``SET ROLE`` that SQL
could ``RESET ROLE`` and act as the superuser.
"""

from __future__ import annotations

LIBRARY = "loomdb_owner"
ROLE = "loomdb_user"


def native_sql() -> str:
    """Statements for inside the ``DO`` block that runs where the library is installed."""
    lines = []
    for function, symbol, args, returns in (
        ("loom._owner_begin", "loomdb_owner_begin", "role name", "bigint"),
        ("loom._owner_end", "loomdb_owner_end", "key bigint", "void"),
    ):
        types = args.split()[1]
        lines += [
            f"    CREATE OR REPLACE FUNCTION {function}({args}) RETURNS {returns}",
            f"        LANGUAGE c VOLATILE STRICT PARALLEL UNSAFE AS '$libdir/{LIBRARY}', "
            f"'{symbol}';",
            f"    REVOKE ALL ON FUNCTION {function}({types}) FROM PUBLIC;",
            f"    GRANT EXECUTE ON FUNCTION {function}({types}) TO {ROLE};",
        ]
    lines.append(
        "    COMMENT ON FUNCTION loom._owner_begin(name) IS 'act as a role whose SQL loomdb runs, "
        "in a security-restricted operation, until loom._owner_end(the key it returns)';"
    )
    return "\n".join(lines)
