"""``fpga-sim``: a bit-exact, cycle-level software model of the MLWeaving SGD engine.

``Job`` is the engine's descriptor; ``Engine(job).run_epoch`` and ``train`` run the bit-exact
fixed-point datapath; ``simulate(job)`` is the performance model alone.  See each module for
the paper section it implements and where loomdb departs from it.
"""

from loomdb.accel.fpga_sim.backend import FpgaSimBackend
from loomdb.accel.fpga_sim.engine import Engine, loss, reference_sgd, tolerance, train
from loomdb.accel.fpga_sim.fixed_point import model_to_fixed, to_float
from loomdb.accel.fpga_sim.job import MAX_DIMENSION, Job
from loomdb.accel.fpga_sim.perf import closed_form, epoch_bytes, simulate

__all__ = [
    "MAX_DIMENSION",
    "Engine",
    "FpgaSimBackend",
    "Job",
    "closed_form",
    "epoch_bytes",
    "loss",
    "model_to_fixed",
    "reference_sgd",
    "simulate",
    "to_float",
    "tolerance",
    "train",
]
