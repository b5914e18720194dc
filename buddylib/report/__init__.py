"""The report: ``make reproduce`` (:mod:`.reproduce`) runs the pipeline (:mod:`.pipeline`), the benchmark
(:mod:`.bench`) and the notebooks (:mod:`.notebooks`) and writes the index page (:mod:`.index_page`)."""
