-- depends_on: {{ ref('iris_training') }}
with evaluated as (
    select {{ loomdb.evaluate(var('loomdb_model'), ref('iris_holdout')) }} as metrics
)
select
    {{ loomdb.metric('metrics', 'accuracy') }} as accuracy,
    {{ loomdb.metric('metrics', 'f1') }} as f1,
    {{ loomdb.metric('metrics', 'rows') }} as rows_evaluated,
    metrics
from evaluated
