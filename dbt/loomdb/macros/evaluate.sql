{#-
  Evaluate a model on a relation (or one SELECT) holding its features and label: loom_evaluate's
  JSON text (accuracy, precision, recall, f1, log_loss, roc_auc / mse, mae, r2), e.g. in a
  metrics model (`options`: loom_evaluate's, e.g. {'split': 'test'}, as a mapping or its JSON text):
    select {{ loomdb.metric(loomdb.evaluate('churn', ref('holdout')), 'accuracy') }} as accuracy
-#}
{% macro evaluate(model, relation, options={}) -%}
  {%- set source = loomdb.source(relation, 'loomdb.evaluate', 'loom_evaluate') -%}
  {%- if loomdb.skip_empty("not evaluating " ~ model ~ " (NULL metrics: no rows to evaluate on)") -%}
    {{ return("cast(null as text)") }}
  {%- endif -%}
  {{ loomdb.qualified('loom_evaluate') }}({{ loomdb.literal(model) }}, {{ loomdb.literal(source) }}, {{ loomdb.options_literal(options, 'loomdb.evaluate') }})
{%- endmacro %}

{#-
  A data test that fails when a metric of `loomdb_model` on the tested relation is below
  `min_value` (or above `max_value`, e.g. for mse), or missing:
    data_tests:
      - loomdb.evaluate: {loomdb_model: churn, metric: accuracy, min_value: 0.9}
  (`options`: loom_evaluate's, e.g. {split: test}.)  A bound that is not a finite number (or its text) is refused when the test compiles.
  Under --empty (no rows, no model trained) it passes without evaluating, and logs so.
-#}
{% test evaluate(model, loomdb_model, metric='accuracy', min_value=none, max_value=none, options={}) %}
  {%- if min_value is none and max_value is none -%}
    {{ exceptions.raise_compiler_error("loomdb.evaluate: give min_value or max_value") }}
  {%- endif -%}
  {%- set low = loomdb.bound(min_value, 'min_value') -%}
  {%- set high = loomdb.bound(max_value, 'max_value') -%}
  {%- if loomdb.skip_empty("the evaluate test of " ~ loomdb_model ~ " passes unevaluated (no rows to evaluate on)") %}
select cast(null as double precision) as {{ adapter.quote(metric) }} where false
  {%- else %}
  {#- a `where` config makes `model` a subquery with an alias: loomdb.evaluate reads one SELECT from it #}
with evaluated as (
  select {{ loomdb.metric(loomdb.evaluate(loomdb_model, model, options), metric) }} as {{ adapter.quote(metric) }}
)
select * from evaluated
where {{ adapter.quote(metric) }} is null
  {%- if low is not none %} or {{ adapter.quote(metric) }} < {{ loomdb.number(low) }}{% endif %}
  {%- if high is not none %} or {{ adapter.quote(metric) }} > {{ loomdb.number(high) }}{% endif %}
  {%- endif %}
{% endtest %}

{#- The evaluate test's bound as a float: none stays none; anything but a finite number (or its
    text) is refused, never read as 0. -#}
{% macro bound(value, name) -%}
  {%- if value is none -%}
    {{ return(none) }}
  {%- endif -%}
  {%- set number = none if value is boolean else value | float(none) -%}
  {%- if number is none or number != number or number > 1.7976931348623157e308 or number < -1.7976931348623157e308 -%}
    {{ exceptions.raise_compiler_error("loomdb.evaluate: " ~ name ~ " must be a finite number, got " ~ (value | string) ~ " (write e.g. " ~ name ~ ": 0.9)") }}
  {%- endif -%}
  {{ return(number) }}
{%- endmacro %}
