"""test_gpt2_reference.py — the NumPy GPT-2 reference (tests/reference/gpt2.py) and its
checkpoint I/O (gpt2_io.py), on small random models written by tests/gen.

What must hold, and the yardstick each is checked against:
  - one-token-at-a-time KV-cache decode == the full forward (emb, every residual, logits):
    in f64 to 1e-12, in f32 to 2e-6 relative; greedy through the cache == greedy by
    re-running the full forward on the growing sequence;
  - llm.c f32, Hugging Face safetensors with and without `transformer.`, and a random
    re-write of each load to the very same weights (bit for bit); llm.c bf16 loads to the
    f32 weights rounded to bf16 by ml_dtypes; padding rows of wte never reach the logits;
  - f32 against f64 on the 124M-like width stays well inside the C program's tolerances;
  - an independent JAX formulation (jax.nn.gelu(approximate=True), jax.nn.softmax,
    jnp layer norm with a boolean mask) of the same model gives the same logits;
  - broken files raise CheckpointError naming the field; compare() fails on a perturbed
    residual, a missing file or different ids.
The Hugging Face (torch) cross-check is test_gpt2_hf.py; the bundled model's files are
checked in test_gpt2_bundled.py.
"""

import io
import json
import pathlib
import sys

import ml_dtypes
import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "reference"))
sys.path.insert(0, str(REPO / "tests" / "gen"))
import gen_gpt2_checkpoints as gen  # noqa: E402
import gpt2  # noqa: E402
import gpt2_io  # noqa: E402
from gpt2_io import CheckpointError  # noqa: E402

SMALL = gen.make_config(L=2, C=64, NH=4, V=500, maxT=64)  # Vp 512: padding exercised


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpt2")
    gen.write(out, "m", SMALL, seed=7, formats=gen.FORMATS)
    return out


def rand_ids(n, V, seed=0):
    return np.random.default_rng(seed).integers(0, V, n)


def rel(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 2e-6)])
def test_kv_decode_matches_full_forward(ckpts, dtype, tol):
    m = gpt2.Model.load(ckpts / "m.bin", dtype)
    ids = rand_ids(40, SMALL.vocab_size)
    full = m.forward(ids)
    cache = m.new_cache()
    pre = m.step(ids[:13], cache, all_logits=True)    # a prefill, then single tokens
    outs = [pre] + [m.step(ids[i:i + 1], cache) for i in range(13, 40)]
    emb = np.concatenate([o.emb for o in outs])
    logits = np.concatenate([pre.logits] + [o.logits for o in outs[1:]])
    assert emb.shape == full.emb.shape
    assert rel(emb, full.emb) <= tol
    for l in range(SMALL.num_layers):
        res = np.concatenate([o.res[l] for o in outs])
        assert rel(res, full.res[l]) <= tol, f"block {l}"
    assert logits.shape == (40, SMALL.vocab_size)
    assert np.abs(logits - full.logits).max() <= tol * np.abs(full.logits).max()


def test_greedy_with_cache_equals_greedy_without(ckpts):
    m = gpt2.Model.load(ckpts / "m.bin", np.float64)
    prompt = list(rand_ids(5, SMALL.vocab_size, seed=3))
    ids = gpt2.generate(m, prompt, 20, eot=None)
    ref = list(prompt)
    for _ in range(20):
        ref.append(int(np.argmax(m.forward(ref).logits[-1])))
    assert ids == ref


def test_generate_stops_at_eot_and_context(ckpts):
    m = gpt2.Model.load(ckpts / "m.bin")
    prompt = [1, 2, 3]
    free = gpt2.generate(m, prompt, 5, eot=None)
    stop = gpt2.generate(m, prompt, 5, eot=free[4])  # the 2nd new token (or an earlier copy)
    assert stop == free[:free.index(free[4], 3) + 1]
    long = gpt2.generate(m, list(rand_ids(60, SMALL.vocab_size)), 100, eot=None)
    assert len(long) == SMALL.max_seq_len + 1  # fed positions 0..maxT-1, never maxT


def test_sampling_is_reproducible_and_respects_top_k(ckpts):
    m = gpt2.Model.load(ckpts / "m.bin")
    mk = lambda seed: gpt2.Sampler(greedy=False, temperature=0.9, top_k=5, seed=seed)  # noqa
    a = gpt2.generate(m, [1, 2], 30, mk(11), eot=None)
    b = gpt2.generate(m, [1, 2], 30, mk(11), eot=None)
    c = gpt2.generate(m, [1, 2], 30, mk(12), eot=None)
    assert a == b and a != c
    s = gpt2.Sampler(greedy=False, top_k=3, seed=0)
    logits = np.arange(10, dtype=np.float32)
    assert {s(logits) for _ in range(200)} == {7, 8, 9}
    s = gpt2.Sampler(greedy=False, top_p=0.5, seed=0)
    logits = np.log(np.array([0.05, 0.05, 0.3, 0.6], np.float32))
    assert {s(logits) for _ in range(100)} == {3}


def test_formats_load_identical_weights(ckpts):
    cfg, w = gpt2_io.load(ckpts / "m.bin")
    assert cfg == SMALL
    assert np.all(w["wte"][SMALL.vocab_size:] == 0)
    want = gpt2_io.random_weights(SMALL, 7)
    for name in gpt2_io.PARAM_NAMES:
        assert np.array_equal(w[name], want[name]), name
    for hf in ("m_hf", "m_hf_noprefix", "m_hf/model.safetensors"):
        hcfg, hw = gpt2_io.load(ckpts / hf)
        assert hcfg.vocab_size == SMALL.vocab_size and hcfg.padded_vocab_size == 500
        assert hw["wte"].shape == (500, SMALL.channels)
        for name in gpt2_io.PARAM_NAMES:
            a = w[name][:SMALL.vocab_size] if name == "wte" else w[name]
            assert np.array_equal(hw[name], a), f"{hf}: {name}"
    bcfg, bw = gpt2_io.load(ckpts / "m_bf16.bin")
    assert bcfg == SMALL
    for name in gpt2_io.PARAM_NAMES:
        assert np.array_equal(bw[name], w[name].astype(ml_dtypes.bfloat16).astype(np.float32))


def test_llmc_layout_matches_llmc_byte_for_byte(ckpts):
    """The header and tensor offsets as train_gpt2.c reads them, independently of read_llmc."""
    raw = (ckpts / "m.bin").read_bytes()
    h = np.frombuffer(raw[:1024], "<i4")
    assert list(h[:8]) == [20240326, 3, 64, 500, 2, 4, 64, 512] and not h[8:].any()
    f = np.frombuffer(raw[1024:], "<f4")
    want = gpt2_io.random_weights(SMALL, 7)
    C, L, Vp, T = 64, 2, 512, 64
    off = {"wte": 0, "wpe": Vp * C, "ln1w": Vp * C + T * C}
    off["qkvw"] = off["ln1w"] + 2 * L * C       # after ln1w, ln1b
    off["lnfb"] = len(f) - C
    for name, o in off.items():
        a = want[name].reshape(-1)
        assert np.array_equal(f[o:o + a.size], a), name
    hb = np.frombuffer((ckpts / "m_bf16.bin").read_bytes()[:1024], "<i4")
    assert hb[1] == 5 and (ckpts / "m_bf16.bin").stat().st_size == 1024 + 2 * len(f)


def test_hf_layout_is_conv1d(ckpts):
    from safetensors.numpy import load_file
    t = load_file(str(ckpts / "m_hf" / "model.safetensors"))
    w = gpt2_io.random_weights(SMALL, 7)
    assert t["transformer.h.1.attn.c_attn.weight"].shape == (64, 192)
    assert np.array_equal(t["transformer.h.1.attn.c_attn.weight"], w["qkvw"][1].T)
    assert np.array_equal(t["transformer.h.0.mlp.c_proj.weight"], w["fcprojw"][0].T)
    assert t["transformer.wte.weight"].shape == (500, 64)
    t2 = load_file(str(ckpts / "m_hf_noprefix" / "model.safetensors"))
    assert set(t2) == {k[len("transformer."):] for k in t}
    hc = json.loads((ckpts / "m_hf" / "config.json").read_text())
    assert (hc["n_layer"], hc["n_head"], hc["n_embd"], hc["vocab_size"], hc["n_positions"]) \
        == (2, 4, 64, 500, 64)


def test_padding_rows_never_reach_logits(ckpts, tmp_path):
    cfg, w = gpt2_io.load(ckpts / "m.bin")
    w["wte"][cfg.vocab_size:] = 100.0   # would win every argmax if they were logits
    gpt2_io.write_llmc(tmp_path / "p.bin", cfg, w)
    m = gpt2.Model.load(tmp_path / "p.bin")
    out = m.forward([1, 2, 3])
    assert out.logits.shape == (3, cfg.vocab_size)
    ref = gpt2.Model.load(ckpts / "m.bin").forward([1, 2, 3])
    assert np.array_equal(out.logits, ref.logits)


def test_f32_against_f64_at_gpt2_width():
    """The reference itself in f32 sits far inside the C program's tolerances."""
    cfg = gen.make_config(L=2, C=768, NH=12, V=2000, maxT=64)
    w = gpt2_io.random_weights(cfg, 5)
    ids = rand_ids(32, cfg.vocab_size, seed=2)
    a, b = gpt2.Model(cfg, w, np.float32).forward(ids), gpt2.Model(cfg, w, np.float64).forward(ids)
    assert max(rel(x, y) for x, y in zip(a.res, b.res)) < 1e-5
    assert np.abs(a.logits - b.logits).max() < 1e-4


def jax_logits(cfg, w, ids):
    """The same model written again with jax.nn, sharing no code with gpt2.py."""
    jax = pytest.importorskip("jax")
    with jax.enable_x64(True):   # scoped: other suites in the session run JAX in f32
        p = {k: jax.numpy.asarray(v, jax.numpy.float64) for k, v in w.items()}
        f = jax.jit(lambda p, ids: _jax_logits(jax, cfg, p, ids))   # one compile, not one per op
        return np.asarray(f(p, jax.numpy.asarray(ids)))


def _jax_logits(jax, cfg, p, ids):
    jnp = jax.numpy
    T, C, H = len(ids), cfg.channels, cfg.num_heads

    def ln(x, g, b):
        m, v = jnp.mean(x, -1, keepdims=True), jnp.var(x, -1, keepdims=True)
        return (x - m) * jax.lax.rsqrt(v + 1e-5) * g + b

    x = p["wte"][ids] + p["wpe"][:T]
    mask = jnp.tril(jnp.ones((T, T), bool))
    for l in range(cfg.num_layers):
        q, k, v = jnp.split(jnp.einsum("tc,oc->to", ln(x, p["ln1w"][l], p["ln1b"][l]),
                                       p["qkvw"][l]) + p["qkvb"][l], 3, axis=-1)
        q, k, v = (z.reshape(T, H, C // H) for z in (q, k, v))
        s = jnp.einsum("thd,shd->hts", q, k) / jnp.sqrt(C // H)
        a = jax.nn.softmax(jnp.where(mask, s, -jnp.inf), axis=-1)
        y = jnp.einsum("hts,shd->thd", a, v).reshape(T, C)
        x = x + y @ p["attprojw"][l].T + p["attprojb"][l]
        hdn = jax.nn.gelu(ln(x, p["ln2w"][l], p["ln2b"][l]) @ p["fcw"][l].T + p["fcb"][l],
                          approximate=True)
        x = x + hdn @ p["fcprojw"][l].T + p["fcprojb"][l]
    return ln(x, p["lnfw"], p["lnfb"]) @ p["wte"][:cfg.vocab_size].T


def test_against_independent_jax_formulation(ckpts):
    cfg, w = gpt2_io.load(ckpts / "m.bin")
    ids = rand_ids(24, cfg.vocab_size, seed=9)
    want = jax_logits(cfg, w, ids)
    got = gpt2.Model(cfg, w, np.float64).forward(ids).logits
    assert np.abs(got - want).max() < 1e-12 * max(1.0, np.abs(want).max())


# ---------------------------------------------------------------------------------------
# Broken files

def header_of(path):
    return np.frombuffer(pathlib.Path(path).read_bytes()[:1024], "<i4").copy()


def with_header(src, dst, **fields):
    raw = bytearray(pathlib.Path(src).read_bytes())
    h = header_of(src)
    for i, v in fields.items():
        h[int(i[1:])] = v
    raw[:1024] = h.tobytes()
    pathlib.Path(dst).write_bytes(bytes(raw))
    return dst


@pytest.mark.parametrize("fields,msg", [
    ({"h0": 20240327}, "magic"), ({"h1": 4}, "version"), ({"h4": 0}, "num_layers"),
    ({"h5": 5}, "not a multiple"), ({"h7": 256}, "padded_vocab_size"),
    ({"h6": 128}, "needs"), ({"h3": -1}, "vocab_size")])
def test_llmc_bad_header(ckpts, tmp_path, fields, msg):
    bad = with_header(ckpts / "m.bin", tmp_path / "bad.bin", **fields)
    with pytest.raises(CheckpointError, match=msg) as e:
        gpt2_io.load(bad)
    assert "bad.bin" in str(e.value)


@pytest.mark.parametrize("cut", [10, 1024, 5000, -4])
def test_llmc_truncated_or_long(ckpts, tmp_path, cut):
    raw = (ckpts / "m.bin").read_bytes()
    p = tmp_path / "t.bin"
    p.write_bytes(raw[:cut] if cut > 0 else raw + b"\0" * -cut)
    with pytest.raises(CheckpointError, match="bytes"):
        gpt2_io.load(p)


def test_hf_bad_files(ckpts, tmp_path):
    d = tmp_path / "hf"
    d.mkdir()
    st = (ckpts / "m_hf" / "model.safetensors").read_bytes()
    (d / "model.safetensors").write_bytes(st)
    with pytest.raises(CheckpointError, match="config.json"):
        gpt2_io.load(d)
    hc = json.loads((ckpts / "m_hf" / "config.json").read_text())
    (d / "config.json").write_text(json.dumps(dict(hc, n_layer=3)))
    with pytest.raises(CheckpointError, match="h.2.ln_1.weight"):
        gpt2_io.load(d)
    (d / "config.json").write_text(json.dumps(dict(hc, n_embd=32, n_head=4)))
    with pytest.raises(CheckpointError, match="shape"):
        gpt2_io.load(d)
    (d / "config.json").write_text(json.dumps(dict(hc, activation_function="relu")))
    with pytest.raises(CheckpointError, match="activation_function"):
        gpt2_io.load(d)
    (d / "config.json").write_text(json.dumps(hc))
    (d / "model.safetensors").write_bytes(st[:len(st) // 2])
    with pytest.raises(CheckpointError, match="safetensors"):
        gpt2_io.load(d)


# ---------------------------------------------------------------------------------------
# Verify folders and compare()

def test_verify_folder_layout_and_compare(ckpts, tmp_path):
    rc = gpt2._main(["generate", "--model", str(ckpts / "m.bin"), "--ids", "5,6,7,8",
                     "--tokens", "10", "--greedy", "--no-eot", "--verify",
                     str(tmp_path / "ref")])
    assert rc == 0
    ref = tmp_path / "ref"
    ids = np.load(ref / "ids.npy")
    assert ids.dtype == np.int32 and len(ids) == 14 and list(ids[:4]) == [5, 6, 7, 8]
    assert sorted(p.name for p in ref.glob("step_*")) == sorted(f"step_{k}" for k in range(10))
    assert np.load(ref / "step_0" / "emb.npy").shape == (4, 64)
    assert np.load(ref / "step_3" / "res_1.npy").shape == (1, 64)
    lg = np.load(ref / "step_9" / "logits.npy")
    assert lg.shape == (500,) and lg.dtype == np.float32
    assert int(np.argmax(np.load(ref / "step_2" / "logits.npy"))) == ids[4 + 2]

    import shutil
    got = tmp_path / "got"
    shutil.copytree(ref, got)
    assert gpt2.compare(ref, got, out=io.StringIO())
    r = np.load(got / "step_4" / "res_0.npy")
    np.save(got / "step_4" / "res_0.npy", r * np.float32(1 + 3e-4))
    log = io.StringIO()
    assert not gpt2.compare(ref, got, out=log)
    assert "step 4:" in log.getvalue() and "FAIL" in log.getvalue()
    shutil.rmtree(got)
    shutil.copytree(ref, got)
    np.save(got / "ids.npy", ids[::-1].copy())
    assert not gpt2.compare(ref, got, out=io.StringIO())
    (got / "step_7" / "logits.npy").unlink()
    np.save(got / "ids.npy", ids)
    assert not gpt2.compare(ref, got, out=io.StringIO())
