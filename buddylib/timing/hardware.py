"""Hardware presets as data: GPUs and links, each value with its public source or labelled an assumption.

Simulator habit (Ramulator, SCALE-Sim): parameters live in one table, not in code; a run
records the exact preset it used. Bandwidths are per direction, in bytes per second. Every
bandwidth, capacity and peak comes from a datasheet or specification; no vendor publishes the
latency of a GPU's remote-memory access over these links, so the latencies are assumptions,
labelled as such, and notebook 05 sweeps them from 0.5x to 8x.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

GB = 1e9
TB = 1e12


@dataclass(frozen=True)
class GPU:
    """A GPU's memory system and arithmetic peak.

    Parameters
    ----------
    name : str
        The preset's name (a key of ``GPUS``).
    hbm_bandwidth, capacity : float
        Device-memory bandwidth (bytes/s) and capacity (bytes).
    fp64_flops, fp32_flops : float
        Arithmetic peaks, FLOP/s.
    source : str
        Where the numbers come from (a datasheet).
    """

    name: str
    hbm_bandwidth: float  # bytes/s
    capacity: float  # bytes
    fp64_flops: float  # FLOP/s
    fp32_flops: float  # FLOP/s
    source: str

    def to_dict(self) -> dict:
        """The preset as a plain dict (JSON, a Dataset's attrs)."""
        return asdict(self)


@dataclass(frozen=True)
class Link:
    """The link to buddy memory: bandwidth per direction and round-trip latency.

    Parameters
    ----------
    name : str
        The preset's name (a key of ``LINKS``).
    bandwidth : float
        Bytes/s per direction.
    latency : float
        Seconds, request to data.
    source : str
        Where the bandwidth comes from.
    latency_source : str
        Where the latency comes from; no vendor publishes one, so each preset's is a labelled assumption.
    """

    name: str
    bandwidth: float  # bytes/s per direction
    latency: float  # seconds, request to data
    source: str  # of the bandwidth
    latency_source: str = "assumption"

    def to_dict(self) -> dict:
        """The preset as a plain dict (JSON, a Dataset's attrs)."""
        return asdict(self)


GPUS: dict[str, GPU] = {g.name: g for g in (
    # NVIDIA Tesla V100 datasheet (2017/2018): 900 GB/s HBM2, 16/32 GB, 7.8 / 15.7 TFLOP/s (SXM2)
    GPU("V100-16GB", 900 * GB, 16 * GB, 7.8 * TB, 15.7 * TB, "NVIDIA Tesla V100 datasheet, SXM2"),
    GPU("V100-32GB", 900 * GB, 32 * GB, 7.8 * TB, 15.7 * TB, "NVIDIA Tesla V100 datasheet, SXM2"),
    # NVIDIA A100 datasheet: 40 GB HBM2 1,555 GB/s; 80 GB HBM2e 2,039 GB/s; 9.7 / 19.5 TFLOP/s
    GPU("A100-40GB", 1555 * GB, 40 * GB, 9.7 * TB, 19.5 * TB, "NVIDIA A100 datasheet, SXM4 40GB"),
    GPU("A100-80GB", 2039 * GB, 80 * GB, 9.7 * TB, 19.5 * TB, "NVIDIA A100 datasheet, SXM4 80GB"),
    # NVIDIA H100 datasheet: SXM5 80 GB HBM3 3.35 TB/s; 34 / 67 TFLOP/s (FP64 / FP32, non-tensor)
    GPU("H100-80GB", 3350 * GB, 80 * GB, 34 * TB, 67 * TB, "NVIDIA H100 datasheet, SXM5"),
    # NVIDIA H200 datasheet: 141 GB HBM3e 4.8 TB/s; same SM array as H100
    GPU("H200-141GB", 4800 * GB, 141 * GB, 34 * TB, 67 * TB, "NVIDIA H200 datasheet, SXM"),
)}

#: No public source gives these latencies (request to data, GPU load from remote memory over the link):
_PCIE_LATENCY = ("assumption: ~1 us, the order of a GPU load from host memory over PCIe (a host round trip); "
                 "swept 0.5x-8x in notebook 05")
_NVLINK_LATENCY = ("assumption: ~0.7 us, a remote load over NVLink, taken a little below PCIe's; "
                   "swept 0.5x-8x in notebook 05")

LINKS: dict[str, Link] = {k.name: k for k in (
    # PCIe x16 per direction: 3.0 ~15.75 GB/s, 4.0 ~31.5, 5.0 ~63 (PCI-SIG specifications)
    Link("PCIe3-x16", 15.75 * GB, 1.0e-6, "PCI-SIG PCIe 3.0 spec, x16 raw per direction", _PCIE_LATENCY),
    Link("PCIe4-x16", 31.5 * GB, 1.0e-6, "PCI-SIG PCIe 4.0 spec, x16 raw per direction", _PCIE_LATENCY),
    Link("PCIe5-x16", 63.0 * GB, 1.0e-6, "PCI-SIG PCIe 5.0 spec, x16 raw per direction", _PCIE_LATENCY),
    # NVLink2 on V100: 6 links x 25 GB/s = 150 GB/s per direction (V100 whitepaper); the
    # Buddy paper's configuration
    Link("NVLink2", 150 * GB, 0.7e-6, "NVIDIA Tesla V100 whitepaper: 6 NVLink2 links x 25 GB/s", _NVLINK_LATENCY),
    # NVLink3 on A100: 12 links, 300 GB/s per direction (A100 whitepaper)
    Link("NVLink3", 300 * GB, 0.7e-6, "NVIDIA A100 whitepaper: 600 GB/s total, 300 per direction", _NVLINK_LATENCY),
    # NVLink4 on H100: 18 links, 450 GB/s per direction (H100 whitepaper)
    Link("NVLink4", 450 * GB, 0.7e-6, "NVIDIA H100 whitepaper: 900 GB/s total, 450 per direction", _NVLINK_LATENCY),
    # NVLink-C2C (Grace Hopper): 900 GB/s total, 450 per direction (GH200 whitepaper)
    Link("NVLink-C2C", 450 * GB, 0.5e-6, "NVIDIA Grace Hopper whitepaper: NVLink-C2C 900 GB/s total",
         "assumption: ~0.5 us, a chip-to-chip link inside one package, taken below NVLink's; swept 0.5x-8x "
         "in notebook 05"),
)}


def gpu(name: str) -> GPU:
    """The GPU preset ``name``.

    Parameters
    ----------
    name : str
        A key of ``GPUS``, e.g. ``"V100-32GB"``.

    Returns
    -------
    GPU

    Raises
    ------
    ValueError
        An unknown preset (the message lists the known ones).

    Examples
    --------
    >>> gpu("V100-32GB").hbm_bandwidth
    900000000000.0
    """
    if name not in GPUS:
        raise ValueError(f"unknown GPU preset {name!r}; available: {', '.join(GPUS)}")
    return GPUS[name]


def link(name: str) -> Link:
    """The link preset ``name``.

    Parameters
    ----------
    name : str
        A key of ``LINKS``, e.g. ``"NVLink2"``.

    Returns
    -------
    Link

    Raises
    ------
    ValueError
        An unknown preset (the message lists the known ones).
    """
    if name not in LINKS:
        raise ValueError(f"unknown link preset {name!r}; available: {', '.join(LINKS)}")
    return LINKS[name]
