{#-
  Evaluate a model on a relation (or one SELECT) holding its features and label: loom_evaluate's
  JSON text (accuracy, precision, recall, f1, log_loss, roc_auc / mse, mae, r2), e.g. in a
  metrics model:
    select {{ loomdb.metric(loomdb.evaluate('churn', ref('holdout')), 'accuracy') }} as accuracy
-#}
{% macro evaluate(model, relation) -%}
  loom_evaluate({{ loomdb.literal(model) }}, {{ loomdb.literal(relation) }})
{%- endmacro %}

{#-
  A data test that fails when a metric of `loomdb_model` on the tested relation is below
  `min_value` (or above `max_value`, e.g. for mse), or missing:
    data_tests:
      - loomdb.evaluate: {loomdb_model: churn, metric: accuracy, min_value: 0.9}
-#}
{% test evaluate(model, loomdb_model, metric='accuracy', min_value=none, max_value=none) %}
  {%- if min_value is none and max_value is none -%}
    {{ exceptions.raise_compiler_error("loomdb.evaluate: give min_value or max_value") }}
  {%- endif -%}
with evaluated as (
  select {{ loomdb.metric(loomdb.evaluate(loomdb_model, model), metric) }} as {{ adapter.quote(metric) }}
)
select * from evaluated
where {{ adapter.quote(metric) }} is null
  {%- if min_value is not none %} or {{ adapter.quote(metric) }} < {{ min_value | float }}{% endif %}
  {%- if max_value is not none %} or {{ adapter.quote(metric) }} > {{ max_value | float }}{% endif %}
{% endtest %}
