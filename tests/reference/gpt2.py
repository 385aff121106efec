"""GPT-2 in NumPy: the reference examples/gpt2 (the C program) is verified against.

    // B = 1 always; T positions, C channels, V vocab, NH heads, hs = C / NH head size
    x = wte[ids] + wpe[pos]                                     // emb (T, C)
    per block l:  x += attnproj(causal_attention(qkv(ln_1(x))))
                  x += fcproj(gelu_tanh(fc(ln_2(x))))          // res_l (T, C)
    logits = ln_f(x) @ wte[:V].T                                // (T, V), tied, real V only

Layer norm eps 1e-5 (biased variance); GELU is the tanh form (OpenAI's `gelu_new`);
attention scores scaled by 1/sqrt(hs), softmax after subtracting the row max, keys at
positions <= the query's. Everything is computed in the model's dtype (float32 by default,
float64 on request for an error-free yardstick).

`Model.step(ids, cache)` runs len(ids) new positions after the cache.length already
cached ones, appending their keys and values to the cache; `Model.forward(ids)` is step
from an empty cache. A decode of one token at a time gives the full forward's results up
to rounding (tests/py/test_gpt2_reference.py checks it).

Generation (greedy, or temperature / top-k / top-p with a seeded numpy Generator): step 0
is the prefill of the whole prompt, whose last-position logits choose the first new
token; step k >= 1 feeds the token chosen at step k-1 (at position P + k - 1 for a prompt
of P tokens) and chooses the next. Greedy is argmax, ties to the lowest id. Generation
stops after N new tokens, after the step that chose `eot` (kept in the output; default
V - 1, `<|endoftext|>` in GPT-2's vocabulary and in the bundled one), or after the step
that fed position maxT - 1 (no position >= maxT is ever fed).

Verify folder (what `gpt2.py generate --verify DIR` writes here, and what the C
program's `--verify DIR` writes for comparison, file for file):

    DIR/ids.npy                    int32 (P + N,): prompt followed by the N generated ids
    DIR/step_K/emb.npy             float32 (n_K, C): wte[id] + wpe[pos] of the positions fed
    DIR/step_K/res_L.npy           float32 (n_K, C): the residual stream after block L
    DIR/step_K/logits.npy          float32 (V,): logits of the step's last position

K and L are plain decimal numbers (step_0, step_1, ..., res_0, res_1, ..., no padding);
n_0 = P (the real prompt rows only, whatever bucket the prefill was padded to), n_K = 1
for K >= 1. Files are NumPy .npy version 1.0, little-endian, C order. `gpt2.py compare
REF DIR` compares two such folders: emb/res by max|a - b| / max|ref| (relative to the
tensor's largest magnitude), logits by max|a - b|, ids exactly.

CLI:
    gpt2.py generate --model FILE (--ids 464,3290 | --prompt TEXT --vocab DIR) --tokens N
                     [--greedy | --temperature T --top-k K --top-p P --seed S]
                     [--eot ID | --no-eot] [--verify DIR] [--dtype f32|f64] [--print-ids]
    gpt2.py compare REF DIR [--logits-atol 1e-3] [--res-rtol 1e-4]
"""

import argparse
import json
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import gpt2_io  # noqa: E402
from gpt2_io import CheckpointError, Config  # noqa: E402,F401

LN_EPS = 1e-5
GPT2_PATTERN = (r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+"""
                r"""|\s+(?!\S)|\s+""")


def layernorm(x, w, b):
    mu = x.mean(-1, keepdims=True)
    xc = x - mu
    var = (xc * xc).mean(-1, keepdims=True)
    return xc / np.sqrt(var + x.dtype.type(LN_EPS)) * w + b


def gelu_tanh(x):
    t = x.dtype.type
    return t(0.5) * x * (t(1) + np.tanh(t(np.sqrt(2 / np.pi)) * (x + t(0.044715) * x * x * x)))


def softmax_rows(a):
    a = a - a.max(-1, keepdims=True)
    e = np.exp(a)
    return e / e.sum(-1, keepdims=True)


class KVCache:
    """Keys and values of the positions run so far: k[l], v[l] are (NH, maxT, hs)."""

    def __init__(self, cfg, dtype):
        shape = (cfg.num_heads, cfg.max_seq_len, cfg.head_size)
        self.k = [np.zeros(shape, dtype) for _ in range(cfg.num_layers)]
        self.v = [np.zeros(shape, dtype) for _ in range(cfg.num_layers)]
        self.length = 0


class StepOut:
    """What one step computed: emb (n, C), res [L x (n, C)], logits (n or 1, V)."""

    def __init__(self, emb, res, logits):
        self.emb, self.res, self.logits = emb, res, logits


class Model:
    def __init__(self, cfg, weights, dtype=np.float32):
        self.cfg = cfg
        self.dtype = np.dtype(dtype)
        self.w = {k: np.ascontiguousarray(v, dtype=self.dtype) for k, v in weights.items()}
        self.lm_head = self.w["wte"][:cfg.vocab_size]  # (V, C): the padding rows never count

    @classmethod
    def load(cls, path, dtype=np.float32):
        cfg, weights = gpt2_io.load(path)
        return cls(cfg, weights, dtype)

    def new_cache(self):
        return KVCache(self.cfg, self.dtype)

    def step(self, ids, cache, all_logits=False):
        """Runs positions cache.length .. cache.length + len(ids) - 1; returns a StepOut."""
        cfg, w = self.cfg, self.w
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        n, p0 = len(ids), cache.length
        if n == 0:
            raise ValueError("step: no tokens")
        if p0 + n > cfg.max_seq_len:
            raise ValueError(f"step: positions up to {p0 + n - 1}, but maxT is "
                             f"{cfg.max_seq_len}")
        if ids.min() < 0 or ids.max() >= cfg.vocab_size:
            raise ValueError(f"step: token id out of range [0, {cfg.vocab_size})")
        C, NH, hs = cfg.channels, cfg.num_heads, cfg.head_size
        t = p0 + n
        x = w["wte"][ids] + w["wpe"][p0:t]                      # (n, C)
        emb = x.copy()
        # Query i (absolute position p0 + i) sees keys 0 .. p0 + i.
        causal = np.arange(t)[None, :] <= (p0 + np.arange(n))[:, None]  # (n, t)
        scale = self.dtype.type(1.0 / np.sqrt(hs))
        res = []
        for l in range(cfg.num_layers):
            h = layernorm(x, w["ln1w"][l], w["ln1b"][l])
            qkv = h @ w["qkvw"][l].T + w["qkvb"][l]              # (n, 3C)
            q, k, v = (qkv[:, i * C:(i + 1) * C].reshape(n, NH, hs).transpose(1, 0, 2)
                       for i in range(3))                        # (NH, n, hs)
            cache.k[l][:, p0:t] = k
            cache.v[l][:, p0:t] = v
            att = (q @ cache.k[l][:, :t].transpose(0, 2, 1)) * scale   # (NH, n, t)
            att = softmax_rows(np.where(causal[None], att, -np.inf))
            y = (att @ cache.v[l][:, :t]).transpose(1, 0, 2).reshape(n, C)
            x = x + (y @ w["attprojw"][l].T + w["attprojb"][l])
            h = layernorm(x, w["ln2w"][l], w["ln2b"][l])
            f = gelu_tanh(h @ w["fcw"][l].T + w["fcb"][l])        # (n, 4C)
            x = x + (f @ w["fcprojw"][l].T + w["fcprojb"][l])
            res.append(x.copy())
        cache.length = t
        rows = x if all_logits else x[-1:]
        logits = layernorm(rows, w["lnfw"], w["lnfb"]) @ self.lm_head.T   # (n or 1, V)
        return StepOut(emb, res, logits)

    def forward(self, ids):
        """The full forward of |ids| from position 0: a StepOut with every position's logits."""
        return self.step(ids, self.new_cache(), all_logits=True)


# ---------------------------------------------------------------------------------------
# Sampling and generation

class Sampler:
    """Greedy (argmax, ties to the lowest id) or seeded temperature / top-k / top-p."""

    def __init__(self, greedy=True, temperature=1.0, top_k=0, top_p=1.0, seed=0):
        if not greedy and temperature <= 0:
            raise ValueError("temperature must be > 0 (or use greedy)")
        self.greedy, self.temperature, self.top_k, self.top_p = greedy, temperature, top_k, top_p
        self.rng = np.random.default_rng(seed)

    def __call__(self, logits):
        if self.greedy:
            return int(np.argmax(logits))
        z = logits.astype(np.float64) / self.temperature
        order = np.argsort(-z, kind="stable")
        if self.top_k > 0:
            order = order[:self.top_k]
        p = softmax_rows(z[order])
        if self.top_p < 1.0:
            keep = np.searchsorted(np.cumsum(p), self.top_p) + 1
            order, p = order[:keep], p[:keep] / p[:keep].sum()
        return int(order[self.rng.choice(len(order), p=p)])


def generate(model, prompt, n_tokens, sampler=None, eot="last", on_step=None):
    """Prompt ids followed by up to |n_tokens| new ones (see the module comment for stops).

    |on_step|(k, StepOut, chosen_id) is called after every step; |eot| is an id, None
    for no stop token, or "last" for V - 1.
    """
    cfg = model.cfg
    sampler = sampler or Sampler()
    eot = cfg.vocab_size - 1 if eot == "last" else eot
    ids = [int(i) for i in prompt]
    if not ids:
        raise ValueError("generate: empty prompt")
    if len(ids) > cfg.max_seq_len:
        raise ValueError(f"generate: prompt of {len(ids)} tokens, maxT is {cfg.max_seq_len}")
    cache = model.new_cache()
    for k in range(n_tokens):
        out = model.step(ids if k == 0 else ids[-1:], cache)
        nxt = sampler(out.logits[-1])
        if on_step:
            on_step(k, out, nxt)
        ids.append(nxt)
        if nxt == eot or cache.length == cfg.max_seq_len:
            break
    return ids


# ---------------------------------------------------------------------------------------
# Verify folders

def verify_writer(folder):
    """An on_step callback writing the verify-folder layout under |folder|."""
    folder = pathlib.Path(folder)

    def on_step(k, out, _nxt):
        d = folder / f"step_{k}"
        d.mkdir(parents=True, exist_ok=True)
        np.save(d / "emb.npy", out.emb.astype("<f4"))
        for l, r in enumerate(out.res):
            np.save(d / f"res_{l}.npy", r.astype("<f4"))
        np.save(d / "logits.npy", out.logits[-1].astype("<f4"))

    return on_step


def compare(ref, got, logits_atol=1e-3, res_rtol=1e-4, out=sys.stdout):
    """Compares verify folder |got| with |ref|; prints one line per step; returns ok.

    Missing files, shape mismatches or different ids fail; max errors go to |out|.
    """
    ref, got = pathlib.Path(ref), pathlib.Path(got)
    ok = True
    steps = sorted((int(p.name.split("_")[1]) for p in ref.glob("step_*")))
    if not steps:
        print(f"{ref}: no step_K folders", file=out)
        return False
    worst_res = worst_logit = 0.0
    for k in steps:
        names = sorted(p.name for p in (ref / f"step_{k}").glob("*.npy"))
        errs = {}
        for name in names:
            gp = got / f"step_{k}" / name
            if not gp.exists():
                print(f"step {k}: {gp} missing", file=out)
                ok = False
                continue
            a, b = np.load(ref / f"step_{k}" / name), np.load(gp)
            if a.shape != b.shape:
                print(f"step {k}: {name}: shape {b.shape}, reference {a.shape}", file=out)
                ok = False
                continue
            d = np.abs(a.astype(np.float64) - b.astype(np.float64))
            if not np.all(np.isfinite(b)):
                errs[name] = np.inf
            elif name == "logits.npy":
                errs[name] = float(d.max())
            else:
                errs[name] = float(d.max() / max(np.abs(a).max(), 1e-30))
        r = max((e for n, e in errs.items() if n != "logits.npy"), default=0.0)
        lg = errs.get("logits.npy", 0.0)
        worst_res, worst_logit = max(worst_res, r), max(worst_logit, lg)
        bad = r > res_rtol or lg > logits_atol
        ok = ok and not bad
        print(f"step {k}: emb/res max rel {r:.3e}  logits max abs {lg:.3e}"
              f"{'  FAIL' if bad else ''}", file=out)
    if (ref / "ids.npy").exists():
        ri = np.load(ref / "ids.npy")
        gi = np.load(got / "ids.npy") if (got / "ids.npy").exists() else None
        same = gi is not None and ri.shape == gi.shape and bool(np.all(ri == gi))
        ok = ok and same
        print(f"ids: {'identical' if same else 'DIFFERENT'} ({len(ri)} in the reference)",
              file=out)
    print(f"worst: emb/res max rel {worst_res:.3e} (limit {res_rtol:g}), logits max abs "
          f"{worst_logit:.3e} (limit {logits_atol:g}): {'ok' if ok else 'FAILED'}", file=out)
    return ok


# ---------------------------------------------------------------------------------------
# Tokenizer (for --prompt): tiktoken built from a GPT-2-format encoder.json + vocab.bpe

def load_tokenizer(vocab_dir):
    """A tiktoken Encoding from |vocab_dir|/encoder.json and vocab.bpe (no network)."""
    import tiktoken
    from tiktoken.load import data_gym_to_mergeable_bpe_ranks

    d = pathlib.Path(vocab_dir)
    ranks = data_gym_to_mergeable_bpe_ranks(str(d / "vocab.bpe"), str(d / "encoder.json"))
    with open(d / "encoder.json") as f:
        eot = json.load(f)["<|endoftext|>"]
    return tiktoken.Encoding(name=f"gpt2-bpe:{d}", pat_str=GPT2_PATTERN,
                             mergeable_ranks=ranks, special_tokens={"<|endoftext|>": eot})


def _main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate", help="generate, optionally writing a verify folder")
    g.add_argument("--model", required=True)
    g.add_argument("--ids", help="comma-separated prompt ids")
    g.add_argument("--prompt", help="prompt text (needs --vocab)")
    g.add_argument("--vocab", help="folder with encoder.json and vocab.bpe")
    g.add_argument("--tokens", type=int, default=10)
    g.add_argument("--greedy", action="store_true")
    g.add_argument("--temperature", type=float, default=1.0)
    g.add_argument("--top-k", type=int, default=0)
    g.add_argument("--top-p", type=float, default=1.0)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--eot", type=int, help="stop id (default V - 1)")
    g.add_argument("--no-eot", action="store_true", help="never stop before --tokens")
    g.add_argument("--verify", help="write the verify folder here")
    g.add_argument("--dtype", choices=("f32", "f64"), default="f32")
    g.add_argument("--print-ids", action="store_true")
    c = sub.add_parser("compare", help="compare a verify folder with a reference one")
    c.add_argument("ref")
    c.add_argument("got")
    c.add_argument("--logits-atol", type=float, default=1e-3)
    c.add_argument("--res-rtol", type=float, default=1e-4)
    a = ap.parse_args(argv)
    if a.cmd == "compare":
        return 0 if compare(a.ref, a.got, a.logits_atol, a.res_rtol) else 1
    try:
        model = Model.load(a.model, np.float32 if a.dtype == "f32" else np.float64)
    except CheckpointError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    enc = load_tokenizer(a.vocab) if a.vocab else None
    if a.ids:
        prompt = [int(s) for s in a.ids.split(",")]
    elif a.prompt is not None and enc:
        prompt = enc.encode(a.prompt, allowed_special="all")
    else:
        print("error: give --ids, or --prompt with --vocab", file=sys.stderr)
        return 2
    eot = None if a.no_eot else (a.eot if a.eot is not None else "last")
    sampler = Sampler(a.greedy, a.temperature, a.top_k, a.top_p, a.seed)
    on_step = verify_writer(a.verify) if a.verify else None
    ids = generate(model, prompt, a.tokens, sampler, eot, on_step)
    if a.verify:
        np.save(pathlib.Path(a.verify) / "ids.npy", np.asarray(ids, "<i4"))
    if a.print_ids:
        print(",".join(str(i) for i in ids[len(prompt):]))
    elif enc:
        print(enc.decode(ids))
    else:
        print(",".join(str(i) for i in ids))
    return 0


if __name__ == "__main__":
    sys.exit(_main())
