"""biglstm: BigLSTM's recipe where it decides memory: a word vocabulary with real frequencies, the log-uniform
sampler of a sampled softmax, sparse gradients of the two tables, and Adagrad's untouched accumulators."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from buddylib import workloads  # noqa: E402
from buddylib.workloads.dl.biglstm import LogUniformSampler  # noqa: E402
from buddylib.workloads.dl.data import english_words, word_batch, word_corpus  # noqa: E402


@pytest.fixture(scope="module")
def run() -> workloads.Run:
    return workloads.get("biglstm").run("quick", seed=0, compressors=["bpc32"])


def test_sampler_draws_follow_the_log_uniform_formula() -> None:
    s = LogUniformSampler(1000)
    p = s.probability(np.arange(1000))
    assert p.sum() == pytest.approx(1.0, abs=1e-12)  # it telescopes to log(V + 1) / log(V + 1)
    n = 400_000
    counts = np.bincount(s.draw(n, np.random.default_rng(1)), minlength=1000)
    assert counts.size == 1000  # no draw outside the vocabulary
    for k in (0, 1, 2, 5, 10, 50, 200, 999):  # each count within 5 binomial standard deviations of n P(k)
        assert abs(counts[k] - n * p[k]) < 5 * np.sqrt(n * p[k] * (1 - p[k])), k
    # the head in bulk: ids 0..99 carry log(101) / log(1001) of the draws
    assert counts[:100].sum() / n == pytest.approx(np.log(101) / np.log(1001), abs=0.005)


def test_unique_sampler_and_its_expected_counts() -> None:
    s = LogUniformSampler(5000)
    ids, tries = s.unique(300, np.random.default_rng(0))
    assert ids.size == np.unique(ids).size == 300 and tries >= 300
    q = s.expected_count(ids, tries)
    assert ((0 < q) & (q <= 1)).all() and q[np.argmin(ids)] == q.max()  # the most frequent id, most expected
    assert q == pytest.approx(1 - (1 - s.probability(ids)) ** tries)
    with pytest.raises(ValueError, match="cannot draw 6 distinct ids from a vocabulary of 5"):
        LogUniformSampler(5).unique(6, np.random.default_rng(0))


def test_words_are_real_english_by_frequency() -> None:
    words, freq = english_words()
    assert len(words) > 300_000 and words[:3] == ("the", "to", "and")
    assert (np.diff(freq) <= 0).all() and freq[0] > 0.01  # ranked by frequency; "the" is 5% of running text
    ids = word_corpus(100_000)
    assert ids.size > 50_000 and 0.9 < (ids >= 0).mean() < 1  # the text's words, a few not in the vocabulary
    x, y = word_batch(4, 20, 100_000, np.random.default_rng(0))
    assert x.shape == y.shape == (4, 20) and (x[:, 1:] == y[:, :-1]).all() and ((x >= 0) & (x < 100_000)).all()


def test_loss_falls(run: workloads.Run) -> None:
    losses = np.array(run.workload.losses)
    assert np.isfinite(losses).all() and losses[-8:].mean() < 0.9 * losses[:8].mean()


def test_sparse_gradients_and_adagrad_state(run: workloads.Run) -> None:
    w = run.workload
    live = w.allocations()
    c = w.cfg
    n, s = c["batch"] * c["seq"], c["samples"]
    # the tables' gradients are the rows looked up, one per lookup (uncoalesced), as TensorFlow's IndexedSlices
    assert live["embedding.weight.grad.indices"][0].shape == (1, n)
    assert live["embedding.weight.grad.values"][0].shape == (n, c["emb"])
    assert live["softmax.weight.grad.values"][0].shape == (n + s, c["proj"])
    assert "embedding.weight.grad" not in live and live["lstm.weight_hh_l0.grad"][1] == "gradients"
    assert {k for n_, (a, k) in live.items() if n_.endswith(".sum")} == {"optimizer"}
    assert live["candidates"][0].shape == (n + s,) and live["candidates"][1] == "input"


def test_untouched_rows_keep_their_initial_accumulator(run: workloads.Run) -> None:
    """A row no gradient reached keeps Adagrad's initial 0.1 exactly; how many softmax rows stay untouched is
    what the log-uniform sampler's frequencies predict."""
    w = run.workload
    live = w.allocations()
    v = w.cfg["vocab"]
    untouched = ~(w.target_rows | w.sampled_rows)
    acc = live["softmax.weight.sum"][0]
    assert (acc[untouched] == np.float32(0.1)).all() and (acc[~untouched] > np.float32(0.1)).mean() > 0.5
    # never a target: untouched with probability (1 - P(k)) ** draws
    q = (1 - w.sampler.probability(np.arange(v))[~w.target_rows]) ** w.tries
    expected, sd = q.sum(), np.sqrt((q * (1 - q)).sum())
    assert abs(untouched.sum() - expected) < 5 * sd + 1, (untouched.sum(), expected, sd)
    assert 0.05 < untouched.mean() < 0.95  # the quick run leaves a real share of the table untouched
    # the input embedding: rows never an input token
    seen = np.zeros(v, bool)
    seen[live["embedding.weight.grad.indices"][0]] = True  # the last step's at least
    emb = live["embedding.weight.sum"][0]
    assert (emb[seen] > np.float32(0.1)).any()
    assert (emb == np.float32(0.1)).all(axis=1).mean() > 0.5  # most of the vocabulary never occurred


def test_profile_gathers_the_tables(run: workloads.Run) -> None:
    k = {k.name: k for k in run.profile.kernels}
    emb = next(a for a in k["fwd.embedding"].accesses if a.allocation == "embedding.weight")
    assert (emb.pattern, emb.index, emb.row) == ("gather", "input", run.workload.cfg["emb"])
    soft = next(a for a in k["fwd.softmax"].accesses if a.allocation == "softmax.weight")
    assert (soft.pattern, soft.index) == ("gather", "candidates")
    opt = {a.allocation: a for a in k["optimizer.adagrad"].accesses}
    assert opt["softmax.weight.sum"].index == "softmax.weight.grad.indices"
    assert opt["lstm.weight_hh_l0.sum"].pattern == "stream"
    assert not any(a.allocation == "softmax.weight" for a in k["bwd.softmax"].accesses)  # never the whole table
    assert {"input", "candidates", "softmax.weight.grad.indices"} <= set(run.index_arrays)


def test_adam_instead_of_the_recipe(tmp_path) -> None:
    """The optimizer study trains with Adam (SparseAdam for the sparse tables): the same allocations but the two
    moments in place of Adagrad's accumulators, untouched rows' moments exactly 0; its result is cached."""
    from buddylib.studies import fidelity

    w = workloads.get("biglstm")
    w.adam = True
    w.run("quick", seed=0, compressors=["bpc32"])
    live = w.allocations()
    assert not any(n.endswith(".sum") for n in live)
    m = live["softmax.weight.exp_avg"][0]
    untouched = ~(w.target_rows | w.sampled_rows)
    assert untouched.any() and (m[untouched] == 0).all() and (m[~untouched] != 0).any(axis=1).all()
    assert w.profile().kernels[-1].name == "optimizer.adam"
    ds = fidelity.optimizer(["biglstm"], "quick", data=tmp_path, progress=False)
    assert set(ds.compressor.values) == set(fidelity.COMPRESSORS) and (tmp_path / "biglstm-quick-s0.adam.nc").exists()
    assert 0 < float(ds.optimizer_share.item()) < 1 and ds.effective_ratio.sel(compressor="bpc32").item() > 1
    again = fidelity.optimizer(["biglstm"], "quick", data=tmp_path, progress=False)
    assert again.attrs["seconds"] == ds.attrs["seconds"]  # read back, not run again


def test_scales_between_quick_and_paper_size_the_vocabulary() -> None:
    """The tables are the memory: a footprint between quick and paper scales the vocabulary (up to LM1B's), and
    a small one samples at most half of it (8,192 distinct ids cannot come from 3,906 words)."""
    from buddylib.workloads.dl.biglstm import LM1B_VOCAB

    for mib, vocab, samples in ((5, 3906, 1953), (128, 100_000, 8192), (1024, LM1B_VOCAB, 8192)):
        w = workloads.get("biglstm")
        w.configure(mib << 20)
        assert (w.cfg["vocab"], w.cfg["samples"]) == (vocab, samples), mib
        assert w.sampler.vocab == vocab
