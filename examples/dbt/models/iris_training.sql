-- The training rows; its post-hook (dbt_project.yml) trains var('loomdb_model') on them.
select sepal_length, sepal_width, petal_length, petal_width, species_id
from {{ ref('iris_features') }}
where split = 'train'
