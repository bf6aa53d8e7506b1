{#-
  Predict in a select list:
    select id, {{ loomdb.predict('churn', ['tenure', 'spend', 'calls']) }} as churn from ...
  `columns` are column names (or expressions) in the order the model was trained on.
-#}
{% macro predict(model, columns) -%}
  {{ loomdb.qualified('loom_predict') }}({{ loomdb.literal(model) }}, {{ loomdb.array(columns) }})
{%- endmacro %}

{#- P(positive class) for binary logistic models, P(predicted class) for one-vs-rest. -#}
{% macro predict_proba(model, columns) -%}
  {{ loomdb.qualified('loom_predict_proba') }}({{ loomdb.literal(model) }}, {{ loomdb.array(columns) }})
{%- endmacro %}

{#-
  The model compiled into native SQL over its own feature columns (loom_predict_sql), inlined
  when the model that uses it runs: no UDF call per row.  The model must exist by then (train
  it upstream: a post-hook on a model this one refs).  `proba=true`: loom_predict_proba_sql.
  Under --empty (no rows to predict, and no model trained) NULL stands in for the expression.
-#}
{% macro predict_sql(model, proba=false) -%}
  {%- if not execute or loomdb.skip_empty("not compiling " ~ model ~ " (NULL in its place: no rows to predict)") -%}
    {{ return("cast(null as double precision)") }}
  {%- endif -%}
  {%- set fn = "loom_predict_proba_sql" if proba else "loom_predict_sql" -%}
  {%- set result = run_query("select " ~ loomdb.qualified(fn) ~ "(" ~ loomdb.literal(model) ~ ")") -%}
  {{ return(result.columns[0].values()[0]) }}
{%- endmacro %}
