"""Distributed training on Dask with compressed gradients (SketchML §4.1's training loop).

The database function is the driver: ``loom_train(…, '{"cluster": …, "compress": …}')``
partitions an index's stored minibatches over the workers once, then every step each worker
computes the sparse gradient of its share of the step's minibatch, encodes it with a gradient
codec (``codecs/sketch.py``), and the driver decodes, sums, applies the optimiser (Adam, the
paper's) and sends each worker the model at the columns its next share holds.

* ``options``: the options, what the distributed path honours or refuses, who may use it;
* ``plan``: which stored minibatches form a step and which worker holds each;
* ``messages``: the bytes that travel each way;
* ``worker``: what runs on a worker (its partition, a share's gradient);
* ``cluster``: the workers — in this process, a ``LocalCluster`` or a running scheduler;
* ``runner``: the driver's epoch (a backend with ``run_epoch`` for ``learn/trainer.py``).
"""
