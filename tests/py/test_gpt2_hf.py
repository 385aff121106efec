"""test_gpt2_hf.py — the NumPy GPT-2 reference against Hugging Face's own GPT2LMHeadModel.

The yardstick is code we did not write: transformers' GPT-2 (PyTorch, CPU, f64) and its
save_pretrained / from_pretrained. Three directions:
  - a random GPT2LMHeadModel (every parameter perturbed, so no bias is zero and no norm is
    one) saved by save_pretrained as model.safetensors: our loader + forward against HF's
    forward (hidden states after every block, logits), and our greedy against HF's
    generate() with its own KV cache;
  - the same tensors written by our generator (gpt2_io.write_hf, with and without the
    `transformer.` prefix) and loaded by GPT2LMHeadModel.from_pretrained: HF's logits;
  - llm.c-format round trip: our .bin of HF's weights loads to HF's weights.
torch and transformers are large (about 5.6 GB with torch's CUDA wheels, the only ones on
PyPI) and stay out of tests/requirements.txt; without them this file is skipped, saying so.
To run it: python -m venv build/xcheck-venv && build/xcheck-venv/bin/pip install -r
tests/requirements-xcheck.txt && build/xcheck-venv/bin/python -m pytest tests/py/test_gpt2_hf.py
"""

import pathlib
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch not installed (tests/requirements-xcheck.txt)")
transformers = pytest.importorskip("transformers",
                                   reason="transformers not installed (requirements-xcheck.txt)")

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "reference"))
import gpt2  # noqa: E402
import gpt2_io  # noqa: E402

L, C, NH, V, T = 3, 64, 4, 500, 96


@pytest.fixture(scope="module")
def hf_model(tmp_path_factory):
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=L, n_embd=C, n_head=NH, vocab_size=V, n_positions=T,
                                  bos_token_id=V - 1, eos_token_id=V - 1,
                                  attn_pdrop=0.0, embd_pdrop=0.0, resid_pdrop=0.0)
    m = transformers.GPT2LMHeadModel(cfg)
    with torch.no_grad():
        for name, p in m.named_parameters():
            p.add_(torch.randn_like(p) * (0.1 if "ln" in name else 0.05))
    m.eval()
    d = tmp_path_factory.mktemp("hf") / "model"
    m.save_pretrained(d, safe_serialization=True)
    assert (d / "model.safetensors").exists()
    return m.double(), d


def hf_run(m, ids):
    """HF's hidden state after every block (via hooks) and logits, in f64."""
    outs = []
    hooks = [blk.register_forward_hook(lambda _m, _i, o: outs.append(o[0] if isinstance(
        o, tuple) else o)) for blk in m.transformer.h]
    try:
        with torch.no_grad():
            r = m(torch.tensor([ids]), output_hidden_states=True)
    finally:
        for h in hooks:
            h.remove()
    res = [o[0].numpy() for o in outs]
    return r.hidden_states[0][0].numpy(), res, r.logits[0].numpy()


def report(name, got, want):
    err = float(np.abs(got - want).max())
    print(f"{name}: max abs err {err:.3e} (max |ref| {np.abs(want).max():.3e})")
    return err


def test_forward_matches_hf(hf_model):
    m, d = hf_model
    ids = list(np.random.default_rng(1).integers(0, V, 80))
    emb, res, logits = hf_run(m, ids)
    for dtype, tol in ((np.float64, 1e-10), (np.float32, 2e-5)):
        out = gpt2.Model.load(d, dtype).forward(ids)
        assert report(f"{dtype.__name__} emb", out.emb, emb) <= tol
        for l in range(L):
            assert report(f"{dtype.__name__} res_{l}", out.res[l], res[l]) \
                <= tol * np.abs(res[l]).max()
        assert report(f"{dtype.__name__} logits", out.logits, logits) <= tol * 10


def test_greedy_matches_hf_generate(hf_model):
    m, d = hf_model
    prompt = [3, 141, 59, 26, 5]
    with torch.no_grad():
        hf = m.generate(torch.tensor([prompt]), max_new_tokens=30, do_sample=False,
                        use_cache=True, eos_token_id=None, pad_token_id=0,
                        min_new_tokens=30)[0].tolist()
    ours = gpt2.generate(gpt2.Model.load(d, np.float64), prompt, 30, eot=None)
    assert ours == hf


@pytest.mark.parametrize("prefix", [True, False])
def test_our_safetensors_load_in_hf(hf_model, tmp_path, prefix):
    m, d = hf_model
    cfg, w = gpt2_io.load(d)
    gpt2_io.write_hf(tmp_path, cfg, w, prefix=prefix)
    m2 = transformers.GPT2LMHeadModel.from_pretrained(tmp_path).double().eval()
    ids = list(np.random.default_rng(2).integers(0, V, 50))
    _, _, want = hf_run(m, ids)
    _, _, got = hf_run(m2, ids)
    assert np.array_equal(got, want)  # the same f32 weights, the same HF code
    ref = gpt2.Model(cfg, w, np.float64).forward(ids).logits
    assert report("ours vs HF (our file)", ref, got) <= 1e-10


def test_llmc_roundtrip_of_hf_weights(hf_model, tmp_path):
    m, d = hf_model
    cfg, w = gpt2_io.load(d)
    llcfg = gpt2_io.Config(cfg.max_seq_len, V, gpt2_io.padded_vocab(V), L, NH, C)
    gpt2_io.write_llmc(tmp_path / "m.bin", llcfg, w)
    c2, w2 = gpt2_io.load(tmp_path / "m.bin")
    assert c2 == llcfg and w2["wte"].shape == (512, C)
    sd = {k: v.float().numpy() for k, v in m.state_dict().items()}
    assert np.array_equal(w2["wte"][:V], sd["transformer.wte.weight"])
    assert np.array_equal(w2["qkvw"][2], sd["transformer.h.2.attn.c_attn.weight"].T)
    assert np.array_equal(w2["fcprojw"][0], sd["transformer.h.0.mlp.c_proj.weight"].T)
    for name in gpt2_io.PARAM_NAMES:
        a = w[name]
        assert np.array_equal(w2[name][:a.shape[0]], a), name
