-- depends_on: {{ ref('iris_training') }}  (the model is trained by its post-hook)
{% set features = ['sepal_length', 'sepal_width', 'petal_length', 'petal_width'] %}
select
    id,
    {{ features | join(', ') }},
    species_id,
    {{ loomdb.predict(var('loomdb_model'), features) }} as predicted_id,
    {{ loomdb.predict_proba(var('loomdb_model'), features) }} as confidence,
    {{ loomdb.predict_sql(var('loomdb_model')) }} as predicted_id_native
from {{ ref('iris_holdout') }}
