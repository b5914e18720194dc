"""The paper's headline numbers, quoted (not computed) so plots and reports can show them.

Choukse, Sullivan, O'Connor, Erez, Pool, Nellans, Keckler: *Buddy Compression: Enabling
Larger Memory for Deep Learning and HPC Workloads on GPUs*, ISCA 2020 (arXiv 1903.02596).
"""

CITATION = "Choukse et al., Buddy Compression, ISCA 2020 (arXiv 1903.02596)"

#: average effective capacity over the HPC set: 1.9x in the ISCA version, 2.2x in the arXiv abstract
HPC_RATIO_ISCA = 1.9
HPC_RATIO_ARXIV = 2.2
#: average effective capacity over DL training
DL_RATIO = 1.5
#: slowdown against an ideal GPU with unlimited memory, NVLink2-class link (~150 GB/s per direction)
SLOWDOWN_NVLINK2 = (0.01, 0.02)
