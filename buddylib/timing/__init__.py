"""Timing model: slowdown of Buddy Compression against an ideal GPU, and the UM baseline (SPEC §4)."""

from buddylib.timing.hardware import GPUS, LINKS, gpu, link
from buddylib.timing.model import Params, Workset, slowdown, sweep, traffic, um_slowdown

__all__ = ["GPUS", "LINKS", "Params", "Workset", "gpu", "link", "slowdown", "sweep", "traffic", "um_slowdown"]
