"""``loomdb bench SUITE``: each suite is a module here with ``run(quick) -> list[BenchTable]``.
No paper section.

Benchmarks compare loomdb against a peer or a baseline *in the same run* and print ratios;
they are not tests and tests never assert wall-clock times.
"""

SUITES = {
    "train": "loomdb.bench.train",
    "predict": "loomdb.bench.predict",
    "toc": "loomdb.bench.toc",
    "cold": "loomdb.bench.cold",
    "weave": "loomdb.bench.weave",
    "sim": "loomdb.bench.sim",
    "sketch": "loomdb.bench.sketch",
    "parallel": "loomdb.bench.parallel",
    "pcr": "loomdb.bench.pcr",
    "slimml": "loomdb.bench.slimml",
    "scale": "loomdb.bench.scale",
    "gpu": "loomdb.bench.gpu",
}
