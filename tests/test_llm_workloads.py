"""The LLM-era workloads (suite ``llm``, issue 23): a bf16 KV cache of the real MiniLM, and GPT-style bf16
training with AdamW over a real WordPiece vocabulary."""

from __future__ import annotations

import numpy as np
import pytest

from buddylib import workloads
from buddylib.compressors import get as get_compressor
from buddylib.studies import llm

torch = pytest.importorskip("torch")
if "minilm_kv" not in workloads.names("llm"):
    pytest.skip("the MiniLM model package is not installed", allow_module_level=True)

from buddylib.workloads.dl import llm as llm_workloads  # noqa: E402
from buddylib.workloads.dl import minilm  # noqa: E402


@pytest.fixture(scope="module")
def made() -> dict[str, workloads.Run]:
    """Notebook 10's two quick runs (bytes kept), made once for every test here."""
    return llm.runs("quick", 0)


@pytest.fixture(params=["minilm_kv", "gpt_bf16"])
def run(request: pytest.FixtureRequest, made: dict[str, workloads.Run]) -> workloads.Run:
    return made[request.param]


def test_the_committed_study_is_what_this_machine_measures(made: dict[str, workloads.Run]) -> None:
    """Notebook 10 reads the committed quick study: remade here from the same runs, the checkpoints' numbers are
    identical and the float computation's within the stated tolerance."""
    report = llm.check_committed("quick", 0, fresh=llm.measure("quick", 0, made=made))
    assert report.ok.all(), report.to_string()
    assert report.loc["group_bytes", "max_rel_change"] == 0 and report.exact.any()


def test_a_committed_study_is_read_wherever_a_study_would_be_cached(tmp_path) -> None:
    """make reproduce passes its data folder; the committed study of that scale is read all the same, not remade."""
    for scale in ("quick", "default"):
        ds = llm.study(scale, 0, tmp_path)
        assert ds.attrs["source"] == "committed" and ds.attrs["scale"] == scale
    assert not list(tmp_path.iterdir())


def test_same_seed_same_bytes_and_every_16_bit_tensor_round_trips(run: workloads.Run) -> None:
    snaps = len(run.snapshots) if run.workload.name == "minilm_kv" else 8  # as llm.runs took them
    again = workloads.get(run.workload.name).run("quick", seed=0, compressors=["bpc32"], n_snapshots=snaps)
    assert again.digest == run.digest
    ebo = get_compressor("ebo-bf16")
    n = 0
    for snap in run.snapshots:  # the weights do not change: the last snapshot's; the rest of every one
        for a in snap.allocations:
            if a.dtype == "bfloat16" and (snap is run.snapshots[-1] or a.kind not in ("weights", "half_weights")):
                raw = np.asarray(a.data).view(np.uint16)  # bf16 bits, as encode takes them (test_compressor_paths)
                assert ebo.decode(ebo.encode(raw)) == raw.tobytes(), f"{a.name} step {snap.step}"
                n += 1
    assert n > 20


def test_kv_cache_is_the_bf16_models_keys_and_values_at_every_grid_point(run: workloads.Run) -> None:
    if run.workload.name != "minilm_kv":
        pytest.skip("the KV cache workload")
    w = run.workload
    heads, d = minilm.config()["num_attention_heads"], minilm.config()["hidden_size"]
    shapes = set()
    assert len(run.snapshots) == len(w.grid) + 1  # the start, then every grid point
    for snap in run.snapshots[1:]:
        kv = [a for a in snap.allocations if a.kind == "kv_cache"]
        assert len(kv) == 2 * len(w.layers)
        b, h, t, hd = kv[0].shape
        assert (h, hd) == (heads, d // heads) and all(a.shape == kv[0].shape for a in kv)
        shapes.add((t, b))
        weights = [a for a in snap.allocations if a.kind == "weights"]
        assert all(a.dtype == "bfloat16" for a in weights) and sum(a.nbytes for a in weights) > 40 << 20
    assert shapes == set(w.grid)  # every (length, batch) of the grid, one per step
    assert len({t for t, _ in shapes}) >= 3 and len({b for _, b in shapes}) >= 2
    # the last step's cache against the fp32 checkpoint's keys and values: bf16's rounding apart
    ids = w.input_ids
    ref = minilm.load_model()
    got = {}
    hooks = [ref.encoder.layer[0].attention.self.key.register_forward_hook(lambda m, a, o: got.update(k=o)),
             ref.encoder.layer[0].attention.self.value.register_forward_hook(lambda m, a, o: got.update(v=o))]
    with torch.no_grad():
        ref(ids, torch.zeros_like(ids), torch.ones_like(ids))
    for h_ in hooks:
        h_.remove()
    b, t = ids.shape
    for part, key in (("key", "k"), ("value", "v")):
        cached = w.kv[f"kv.encoder.layer.0.{part}"].float()
        expect = got[key].reshape(b, t, heads, d // heads).transpose(1, 2)
        assert cached.shape == expect.shape
        assert torch.allclose(cached, expect, rtol=0.05, atol=0.05 * float(expect.abs().mean()))
    # the decode step reads every layer's cache and weights once
    for k in run.profile.kernels[1:]:
        read = {a.allocation for a in k.accesses if a.mode == "read"}
        layer = k.name.removeprefix("decode.")
        assert {f"kv.{layer}.key", f"kv.{layer}.value"} <= read
        assert any(n.startswith(f"{layer}.attention.self.query") for n in read)


def test_gpt_training_holds_fp32_masters_adamw_moments_and_bf16_copies(run: workloads.Run) -> None:
    if run.workload.name != "gpt_bf16":
        pytest.skip("the training workload")
    w = run.workload
    assert w.model.wte.weight.shape[0] == len(minilm.tokenizer().vocab) == 30522
    assert isinstance(w.optimizer, torch.optim.AdamW)
    decay = {g["weight_decay"] for g in w.optimizer.param_groups}
    assert decay == {0.0, 0.1}
    kinds: dict[str, set[str]] = {}
    for a in run.snapshots[-1].allocations:
        kinds.setdefault(a.kind, set()).add(a.dtype)
    assert kinds["weights"] == kinds["gradients"] == kinds["optimizer"] == {"float32"}
    assert kinds["half_weights"] == {"bfloat16"} and "bfloat16" in kinds["activations"]
    names = {a.name for a in run.snapshots[-1].allocations}
    assert {"wte.weight.exp_avg", "wte.weight.exp_avg_sq", "wte.weight.bf16"} <= names
    assert w.losses[-1] < w.losses[0] - 1.0  # it learns


def test_the_token_stream_is_real_wordpiece() -> None:
    ids = llm_workloads.wordpiece_corpus()
    tok = minilm.tokenizer()
    assert ids.size > 100_000 and ids.min() >= 0 and ids.max() < len(tok.vocab)
    inverse = {i: t for t, i in tok.vocab.items()}
    words = [inverse[int(i)] for i in ids[:2000]]
    assert "the" in words and any(w.startswith("##") for w in words) and np.mean(ids == tok.unk) < 0.01
