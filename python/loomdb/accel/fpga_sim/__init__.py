"""``fpga-sim``: a bit-exact, cycle-level software model of the MLWeaving SGD engine."""

from loomdb.accel.fpga_sim.backend import FpgaSimBackend
from loomdb.accel.fpga_sim.engine import Engine, reference_sgd
from loomdb.accel.fpga_sim.job import Job
from loomdb.accel.fpga_sim.perf import epoch_bytes, simulate

__all__ = ["Engine", "FpgaSimBackend", "Job", "epoch_bytes", "reference_sgd", "simulate"]
