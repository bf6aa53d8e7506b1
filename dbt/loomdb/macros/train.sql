{#-
  Train a loomdb model on a relation (or one SELECT), replacing a model of the same name.

    as a post-hook, after the model's transaction has committed:
      +post-hook:
        - sql: "{{ loomdb.train('churn', this, 'churned', {'model': 'logistic'}) }}"
          transaction: false
    as a run-operation:
      dbt run-operation loomdb.run_train --args '{model: churn, relation: analytics.customers, label: churned}'

  `options` are loom_train's (README, "SQL reference"), as a mapping or its JSON text; `replace`
  defaults to true here, since dbt rebuilds what it builds.  Under `dbt build --empty` (or run)
  every model is built without rows, so there is nothing to train on: the hook logs that it
  skips training and runs no statement (dbt runs no hook whose SQL is empty).
-#}
{% macro train(model, relation, label, options={}) -%}
  {%- set source = loomdb.source(relation, 'loomdb.train', 'loom_train') -%}
  {%- if loomdb.skip_empty("not training " ~ model ~ " (its relation has no rows)") -%}
    {{ return('') }}
  {%- endif -%}
  {{ return(adapter.dispatch('train', 'loomdb')(model, source, label, loomdb.train_options(options))) }}
{%- endmacro %}

{#- loom_train's options with replace defaulting to true. -#}
{% macro train_options(options) -%}
  {%- set merged = {'replace': true} -%}
  {%- do merged.update(loomdb.options(options, 'loomdb.train')) -%}
  {{ return(merged) }}
{%- endmacro %}

{% macro default__train(model, relation, label, options) -%}
  select {{ loomdb.qualified('loom_train') }}({{ loomdb.literal(model) }}, {{ loomdb.literal(relation) }}, {{ loomdb.literal(label) }}, {{ loomdb.options_literal(options) }})
{%- endmacro %}

{#-
  PostgreSQL trains inside the caller's transaction (it sees the model's uncommitted rows and
  rolls back with it).  On DuckDB loom_train commits on a connection of its own: inside a dbt
  transaction it would read the relation as last committed (the previous run's rows) and a dbt
  ROLLBACK would not undo it.  So on DuckDB the statement opens a transaction of its own, which
  DuckDB refuses inside another one: a hook left inside the model's transaction fails with
  "cannot start a transaction within a transaction" instead of training on stale rows.
-#}
{% macro duckdb__train(model, relation, label, options) -%}
  begin transaction; {{ loomdb.default__train(model, relation, label, options) }}; commit
{%- endmacro %}

{#- Whether loomdb's writing functions run inside dbt's transaction on this adapter. -#}
{% macro transactional() -%}
  {{ return(adapter.dispatch('transactional', 'loomdb')()) }}
{%- endmacro %}

{% macro default__transactional() -%}
  {{ return(true) }}
{%- endmacro %}

{% macro duckdb__transactional() -%}
  {{ return(false) }}
{%- endmacro %}

{#- dbt run-operation loomdb.run_train --args '{model: m, relation: schema.table, label: y, options: {...}}' -#}
{#- (No dbt transaction is opened on DuckDB, so the statement needs no guard there.) -#}
{% macro run_train(model, relation, label, options={}) %}
  {% call statement('loomdb_train', fetch_result=true, auto_begin=loomdb.transactional()) %}
    {{ loomdb.default__train(model, loomdb.source(relation, 'loomdb.train', 'loom_train'), label, loomdb.train_options(options)) }}
  {% endcall %}
  {% do log("loomdb: " ~ load_result('loomdb_train').table.columns[0].values()[0], info=true) %}
{% endmacro %}

{#- dbt run-operation loomdb.drop_model --args '{model: m}': the model, every version (a model
    that does not exist: an error).  The version is passed, as loom_drop_model's "none given"
    (-9223372036854775807: the whole model), rather than left to its default: beside another
    loom_drop_model(text) in loomdb's schema a call leaning on the default is ambiguous. -#}
{% macro drop_model(model) %}
  {% call statement('loomdb_drop_model', auto_begin=loomdb.transactional()) %}
    select {{ loomdb.qualified('loom_drop_model') }}({{ loomdb.literal(model) }}, cast(-9223372036854775807 as bigint))
  {% endcall %}
  {% do log("loomdb: dropped " ~ model, info=true) %}
{% endmacro %}
