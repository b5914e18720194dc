"""Your own data: readers of array files and dumps (:mod:`.readers`) and the recorder of your own PyTorch model
(:mod:`.capture`), each turning it into allocations and snapshots the analysis takes."""
