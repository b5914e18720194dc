"""The studies: results computed from the workloads (:mod:`.experiments`), the committed summaries of the slow ones
(:mod:`.summaries`, remade by :mod:`.remake`), the factors between our numbers and the paper's (:mod:`.fidelity`), the
committed quick-scale fixtures (:mod:`.fixtures`) and LLM-era memory (:mod:`.llm`)."""
