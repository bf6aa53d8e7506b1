select * from {{ ref('iris_metrics') }}
where accuracy < {{ var('min_accuracy') }} or rows_evaluated <> 30
