-- constants cast to the metrics' type: float8 compared with float8, PostgreSQL's own operator
select * from {{ ref('iris_metrics') }}
where accuracy < cast({{ var('min_accuracy') }} as double precision)
   or rows_evaluated <> cast(30 as double precision)
