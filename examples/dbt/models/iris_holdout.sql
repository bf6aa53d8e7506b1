select id, sepal_length, sepal_width, petal_length, petal_width, species, species_id
from {{ ref('iris_features') }}
where split = 'holdout'
