#!/usr/bin/env bash
# Set up loomdb from nothing on a fresh Debian machine, then run the demo or the whole suite.
#
#   bash scripts/setup.sh demo   # venv + loomdb, then sql/demo.sql on embedded DuckDB
#   bash scripts/setup.sh test   # + PostgreSQL 15, plpython3u and its server headers (apt, as
#                                #   root), ruff, mypy, pytest
#
# Environment: PYTHON (default python3), VENV (default .venv), DBT_VENV (default .venv-dbt: the
# test command's dbt, in an environment of its own), LOOMDB_TEST_DSN (use that PostgreSQL
# instead of a throwaway cluster), PYTEST_ARGS (extra pytest arguments).
set -euo pipefail
cd "$(dirname "$0")/.."

mode="${1:-}"
PYTHON="${PYTHON:-python3}"
VENV="${VENV:-.venv}"
DBT_VENV="${DBT_VENV:-.venv-dbt}"

say() { printf '\n==> %s\n' "$*"; }

apt_install() {
    if [ "$(id -u)" -ne 0 ]; then
        echo "not root: skipping apt-get install $* (install them yourself if missing)"
        return 0
    fi
    local missing=()
    for pkg in "$@"; do dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg"); done
    if [ ${#missing[@]} -gt 0 ]; then
        say "apt-get install ${missing[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
    fi
}

make_venv() {  # make_venv EXTRAS [VENV]
    local venv="${2:-$VENV}"
    if ! "$PYTHON" -m venv --help >/dev/null 2>&1; then apt_install python3-venv; fi
    if [ ! -x "$venv/bin/python" ]; then
        say "creating $venv"
        "$PYTHON" -m venv "$venv"
    fi
    "$venv/bin/python" -m pip install -q --upgrade pip
    say "installing loomdb$1 into $venv"
    "$venv/bin/python" -m pip install -q -e ".$1"
}

# jpegtran (libjpeg-turbo's tools): the pcr format transcodes JPEGs to progressive ones with it
case "$mode" in
demo)
    apt_install libjpeg-turbo-progs
    make_venv ""
    say "running sql/demo.sql on embedded DuckDB"
    db="$(mktemp -d)/demo.duckdb"
    "$VENV/bin/loomdb" sql --duckdb "$db" -f sql/demo.sql
    ;;
test)
    if [ -z "${LOOMDB_TEST_DSN:-}" ]; then
        # The server's own Python (/usr/bin/python3) gets a venv of its own: python3-venv.
        # The server headers, make and gcc build CREATE INDEX … USING (loomdb pg install).
        apt_install postgresql-15 postgresql-plpython3-15 python3-venv \
            postgresql-server-dev-15 make gcc
    fi
    apt_install libjpeg-turbo-progs
    make_venv "[test,dask]"  # dask: tests/engines/test_distributed.py
    # dbt-core 1.11 pins pathspec < 0.13, which mypy >= 2 cannot run with: the example dbt
    # project's dbt gets an environment of its own (tests/engines/test_dbt.py runs it)
    make_venv "[dbt]" "$DBT_VENV"
    export LOOMDB_DBT="$DBT_VENV/bin/dbt"
    say "ruff"
    "$VENV/bin/ruff" check python tests
    "$VENV/bin/ruff" format --check python tests
    say "mypy"
    "$VENV/bin/mypy"
    say "pytest"
    # shellcheck disable=SC2086
    "$VENV/bin/python" -m pytest ${PYTEST_ARGS:-}
    ;;
*)
    echo "usage: bash scripts/setup.sh demo|test" >&2
    exit 2
    ;;
esac
