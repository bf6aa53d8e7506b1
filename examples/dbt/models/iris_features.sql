-- Features and a numeric label (loomdb trains on numbers), with a fixed 80/20 split.
select
    id,
    sepal_length,
    sepal_width,
    petal_length,
    petal_width,
    species,
    case species when 'setosa' then 0 when 'versicolor' then 1 else 2 end as species_id,
    case when id % 5 = 0 then 'holdout' else 'train' end as split
from {{ ref('iris') }}
