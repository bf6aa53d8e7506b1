-- The compiled expression and the UDF predict the same class for every row.
select * from {{ ref('iris_predictions') }}
where predicted_id is distinct from predicted_id_native
