{#- Small SQL builders the other macros share. -#}

{#- A value as an SQL string literal (quotes doubled); none is NULL (loom_train's source with an
    `index` option), never the text 'None'. -#}
{% macro literal(value) -%}
  {%- if value is none -%}
    null
  {%- else -%}
    '{{ value | string | replace("'", "''") }}'
  {%- endif -%}
{%- endmacro %}

{#- loomdb's function `name` as the package's SQL calls it.  On PostgreSQL it is qualified with the
    schema the loomdb extension is installed in, read from the catalog when the SQL runs: called by
    name alone, a function of the same signature that another role created in a schema earlier
    on dbt's search_path would be the one run, as dbt's role (CVE-2018-1058's pattern).  On DuckDB
    loomdb's plugin registers the functions on dbt's connection: called by name.  Where loomdb is
    missing (no extension, no plugin) the SQL is refused when it compiles, saying what to add. -#}
{% macro qualified(name) -%}
  {{ return(adapter.dispatch('qualified', 'loomdb')(name)) }}
{%- endmacro %}

{% macro default__qualified(name) -%}
  {{ return(name) }}
{%- endmacro %}

{% macro duckdb__qualified(name) -%}
  {%- if execute and run_query("select 1 from duckdb_functions() where function_name = " ~ loomdb.literal(name) ~ " limit 1").rows | length == 0 -%}
    {{ exceptions.raise_compiler_error("loomdb: " ~ name ~ " is not registered on dbt's DuckDB connection (hint: add loomdb's plugin to the profile's output, plugins: [{module: loomdb.dbt}], with loomdb installed in dbt's environment: pip install 'loomdb[dbt]')") }}
  {%- endif -%}
  {{ return(name) }}
{%- endmacro %}

{% macro postgres__qualified(name) -%}
  {%- if not execute -%}
    {{ return(name) }}
  {%- endif -%}
  {%- set found = run_query("select n.nspname from pg_catalog.pg_extension e join pg_catalog.pg_namespace n on n.oid OPERATOR(pg_catalog.=) e.extnamespace where e.extname OPERATOR(pg_catalog.=) cast('loomdb' as pg_catalog.name)") -%}
  {%- if found.rows | length == 0 -%}
    {{ exceptions.raise_compiler_error("loomdb: the loomdb extension is not installed in this database, so " ~ name ~ " cannot be called (hint: a superuser runs loomdb pg install --dsn ... on the server's machine, and dbt's role is made a member of loomdb_user)") }}
  {%- endif -%}
  {{ return(loomdb.identifier(found.columns[0].values()[0]) ~ "." ~ name) }}
{%- endmacro %}

{#- A name as a quoted SQL identifier (double quotes doubled). -#}
{% macro identifier(name) -%}
  "{{ name | string | replace('"', '""') }}"
{%- endmacro %}

{#- Under dbt's --empty every ref and source renders without rows and the training hook trains
    nothing, so there is nothing to train, evaluate or compile a model from: true, after logging
    `what` (when the SQL runs), under --empty; false otherwise. -#}
{% macro skip_empty(what) -%}
  {%- if not flags.EMPTY -%}
    {{ return(false) }}
  {%- endif -%}
  {%- if execute -%}
    {%- do log("loomdb: --empty: " ~ what, info=true) -%}
  {%- endif -%}
  {{ return(true) }}
{%- endmacro %}

{#- A float as a double precision constant (comparisons with it are float8's own). -#}
{% macro number(value) -%}
  cast({{ value }} as double precision)
{%- endmacro %}

{#- A function's options as a mapping: a mapping, or its JSON object text (as loomdb's functions
    take them), none for none; anything else is refused, never dropped. -#}
{% macro options(options, what) -%}
  {%- set given = fromjson(options) if options is string else options -%}
  {%- if given is not mapping and options is not none -%}
    {{ exceptions.raise_compiler_error(what ~ ": options must be a mapping of the function's options or its JSON object text, e.g. {'model': 'logistic'}; got " ~ (options | string)) }}
  {%- endif -%}
  {{ return(given or {}) }}
{%- endmacro %}

{#- Options (a mapping or its JSON text) as loomdb's JSON text. -#}
{% macro options_literal(options, what="loomdb") -%}
  {{ loomdb.literal(tojson(loomdb.options(options, what))) }}
{%- endmacro %}

{#- A feature vector: each column (or expression) as a double, in order. -#}
{% macro array(columns) -%}
  {{ return(adapter.dispatch('array', 'loomdb')(columns)) }}
{%- endmacro %}

{% macro default__array(columns) -%}
  {%- if columns is string -%}
    {{ exceptions.raise_compiler_error("loomdb: columns must be a list of column names, got the string '" ~ columns ~ "'") }}
  {%- endif -%}
  {%- if columns is mapping or columns is not iterable or columns | list | length == 0 -%}
    {{ exceptions.raise_compiler_error("loomdb: columns must be a non-empty list of column names (or expressions) in the model's feature order, got " ~ (columns | string)) }}
  {%- endif -%}
  ARRAY[{%- for c in columns -%}cast({{ c }} as double precision){{ ", " if not loop.last }}{%- endfor -%}]
{%- endmacro %}

{#- One number out of a JSON text column (loom_evaluate's metrics, loom_train's summary). -#}
{% macro metric(json, name) -%}
  {{ return(adapter.dispatch('metric', 'loomdb')(json, name)) }}
{%- endmacro %}

{% macro default__metric(json, name) -%}
  cast(cast({{ json }} as json) ->> {{ loomdb.literal(name) }} as double precision)
{%- endmacro %}

{#- PostgreSQL names pg_catalog's ->> (json, text): with an untyped literal on its right, another
    role's ->> (json, json) in a schema on the search_path would be an exact match. -#}
{% macro postgres__metric(json, name) -%}
  cast(cast({{ json }} as json) OPERATOR(pg_catalog.->>) cast({{ loomdb.literal(name) }} as text) as double precision)
{%- endmacro %}

{#- What `relation` (a relation, one SELECT, or none) hands loomdb's function `fn` as its source,
    for macro `what`.  dbt renders some relations as a subquery with an alias, '(select … where …)
    alias': on PostgreSQL a ref to a model with an event_time under --sample (DuckDB's has no
    alias: a parenthesised SELECT, which loomdb reads), and a data test's tested relation under a
    where config.  Such a subquery is no source: one SELECT from it is.  An ephemeral model
    renders as the name of a CTE of the query calling the macro, which `fn` cannot see (it runs a
    query of its own): refused, naming the model, also inside the where config's
    '(select * from __dbt__cte__x where …)'. -#}
{% macro source(relation, what, fn) -%}
  {%- if relation is none -%}
    {{ return(none) }}
  {%- endif -%}
  {%- set text = relation | string | trim -%}
  {%- set prefix = api.Relation.add_ephemeral_prefix('') -%}
  {%- if (relation is not string and relation.is_cte) or text.startswith("(select * from " ~ prefix) -%}
    {%- set name = text.split(prefix, 1)[1].split(' ')[0].rstrip(')') -%}
    {{ exceptions.raise_compiler_error(what ~ ": " ~ name ~ " is an ephemeral model (a CTE of this query's), which " ~ fn ~ " cannot read: it runs a query of its own (hint: materialize " ~ name ~ " as a view or table, e.g. {{ config(materialized='view') }} in its file)") }}
  {%- endif -%}
  {%- set aliased = modules.re.fullmatch("\\(.*\\)\\s+\\w+", text, modules.re.S) -%}
  {{ return("select * from " ~ text if aliased else text) }}
{%- endmacro %}
