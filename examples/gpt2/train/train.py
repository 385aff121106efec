"""Trains the bundled GPT-2: vocabulary, model, checkpoint, log — from tiny Shakespeare alone.

    python examples/gpt2/train/train.py            # the committed model (about 25 min, 2 cores)
    python examples/gpt2/train/train.py --quick --out /tmp/q   # a 1-minute smoke run

Steps, all seeded (--seed; batches from numpy's PCG64, init and dropout from jax.random):
 1. Split examples/gpt2/data/tinyshakespeare/input.txt at the last newline before 90 % of
    its characters: train before, validation after.
 2. Learn a byte-level BPE vocabulary of --vocab ids (256 bytes + merges + <|endoftext|>,
    the last id) from the training split with Hugging Face `tokenizers`, write it as
    GPT-2's encoder.json + vocab.bpe (bpe.py), and check that tiktoken built from those two
    files and `tokenizers` loaded from them give the same ids on both splits and on a set of
    hostile strings. Both splits are then encoded with that tiktoken encoding, the same
    files the C tokenizer reads.
 3. Train GPT-2 (model_jax.py: learned positions, pre-LN, tanh GELU, tied embeddings) with
    AdamW (betas 0.9/0.95, weight decay on matrices), linear warmup then cosine decay to a
    tenth, gradient clipping at 1, dropout during training only, on random windows of
    maxT + 1 tokens of the training split.
 4. Write model.bin: llm.c version 3 (f32), V padded to a multiple of 128 as llm.c pads.
 5. Reload it with the NumPy reference (tests/reference/gpt2.py), recompute the validation
    loss there as a check of the export, and sample with it (greedy, and temperature 0.8 /
    top-k 40 with a fixed seed): everything goes to train_log.txt beside the model.
Losses are mean cross-entropy in nats per token (and per character, for comparison with
character-level models); "final" losses are over every non-overlapping maxT window of
each split, without dropout.
"""

import argparse
import json
import math
import pathlib
import platform
import sys
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "tests" / "reference"))
import bpe  # noqa: E402
import gpt2  # noqa: E402
import gpt2_io  # noqa: E402

DATA = REPO / "examples" / "gpt2" / "data" / "tinyshakespeare" / "input.txt"
OUT = REPO / "examples" / "gpt2" / "data" / "shakespeare"
MAX_BYTES = 8 * 1024 * 1024
HOSTILE = ["", " ", "\n\n\n", "   leading and trailing   ", "a  b   c    d\t\te\r\n",
           "don't I'LL we'Ve 'tis o'er 's 't", "12345 3.14159 1,000,000 0x1F",
           "caf\u00e9 na\u00efve \u00fcber \u4e2d\u6587 \U0001F600\U0001F3F3\uFE0F",
           "def f(x):\n    return x**2  # code\n", "<|endoftext|> as plain text",
           "\x00\x01\x7f\u00a0\u2028 control", "ROMEO:\nBut, soft! what light through yonder "
           "window breaks?\n"]


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--vocab", type=int, default=2000)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--channels", type=int, default=144)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ctx", type=int, default=256)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=1200)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--quick", action="store_true", help="tiny smoke run (not the model)")
    a = ap.parse_args(argv)
    if a.quick:
        a.layers, a.channels, a.ctx, a.batch, a.steps = 2, 64, 64, 8, 30
        a.vocab, a.warmup, a.eval_every = 600, 5, 10
    return a


class Log:
    def __init__(self, path):
        self.f = open(path, "w", encoding="utf-8")

    def __call__(self, *parts):
        line = " ".join(str(p) for p in parts)
        print(line, flush=True)
        self.f.write(line + "\n")
        self.f.flush()


def windows(tokens, T):
    """Every non-overlapping (x, y) window of T positions: (n, T) arrays each."""
    n = (len(tokens) - 1) // T
    x = tokens[:n * T].reshape(n, T)
    y = tokens[1:n * T + 1].reshape(n, T)
    return x, y


def main(argv=None):
    a = parse_args(argv)
    import jax
    import jax.numpy as jnp
    import optax
    import tiktoken
    import tokenizers

    import model_jax as mj

    t_start = time.time()
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    log = Log(out / "train_log.txt")
    log("# bundled GPT-2 training log (examples/gpt2/train/train.py)")
    log(f"command: python examples/gpt2/train/train.py {' '.join(argv or sys.argv[1:])}")
    log(f"versions: python {platform.python_version()} numpy {np.__version__} jax "
        f"{jax.__version__} optax {optax.__version__} tokenizers {tokenizers.__version__} "
        f"tiktoken {tiktoken.__version__}; {jax.device_count()} {jax.default_backend()} device(s)")

    # 1-2. Data and vocabulary.
    text = DATA.read_text(encoding="utf-8")
    cut = text.rfind("\n", 0, int(len(text) * 0.9)) + 1
    train_text, val_text = text[:cut], text[cut:]
    t0 = time.time()
    merges = bpe.learn(train_text, a.vocab)
    encoder = bpe.write(out, merges)
    n_checked = bpe.check(out, [train_text, val_text] + HOSTILE)
    enc = gpt2.load_tokenizer(out)
    train = np.asarray(enc.encode_ordinary(train_text), np.int32)
    val = np.asarray(enc.encode_ordinary(val_text), np.int32)
    V = len(encoder)
    assert V == a.vocab and encoder[bpe.EOT] == V - 1 and enc.eot_token == V - 1
    log(f"data: {DATA.relative_to(REPO)} {len(text)} chars; train {len(train_text)} chars "
        f"-> {len(train)} tokens ({len(train_text) / len(train):.3f} chars/token), val "
        f"{len(val_text)} chars -> {len(val)} tokens")
    log(f"vocab: {V} ids (256 bytes + {len(merges)} merges + <|endoftext|> = {V - 1}), "
        f"learned on the train split in {time.time() - t0:.1f} s; tiktoken == tokenizers "
        f"on {n_checked} ids (both splits + {len(HOSTILE)} hostile strings)")

    # 3. Model and training.
    Vp = gpt2_io.padded_vocab(V)
    cfg = gpt2_io.Config(max_seq_len=a.ctx, vocab_size=V, padded_vocab_size=Vp,
                         num_layers=a.layers, num_heads=a.heads, channels=a.channels)
    key = jax.random.PRNGKey(a.seed)
    key, k_init = jax.random.split(key)
    params = mj.init_params(k_init, V, Vp, a.ctx, a.layers, a.heads, a.channels)
    log(f"model: {cfg}, {gpt2_io.num_params(cfg):,} parameters "
        f"({gpt2_io.num_params(cfg) * 4 + 1024:,} bytes as llm.c f32)")
    sched = optax.warmup_cosine_decay_schedule(0.0, a.lr, a.warmup, a.steps, a.lr / 10)
    opt = optax.chain(optax.clip_by_global_norm(1.0),
                      optax.adamw(sched, b1=0.9, b2=0.95, weight_decay=a.weight_decay,
                                  mask=mj.decay_mask(params)))
    opt_state = opt.init(params)
    log(f"training: {a.steps} steps x {a.batch} x {a.ctx} tokens, AdamW lr {a.lr} "
        f"(warmup {a.warmup}, cosine to {a.lr / 10}), betas 0.9/0.95, wd {a.weight_decay}, "
        f"clip 1.0, dropout {a.dropout}, seed {a.seed}")

    @jax.jit
    def train_step(p, s, x, y, k):
        loss, g = jax.value_and_grad(mj.loss_fn)(p, x, y, V, a.heads, a.dropout, k)
        upd, s = opt.update(g, s, p)
        return optax.apply_updates(p, upd), s, loss

    @jax.jit
    def eval_loss(p, x, y):
        return mj.loss_fn(p, x, y, V, a.heads)

    def split_loss(p, tokens, limit=None):
        x, y = windows(tokens, a.ctx)
        if limit:
            x, y = x[:limit], y[:limit]
        tot = 0.0
        for i in range(0, len(x), a.batch):
            xb, yb = x[i:i + a.batch], y[i:i + a.batch]
            tot += float(eval_loss(p, jnp.asarray(xb), jnp.asarray(yb))) * len(xb)
        return tot / len(x)

    rng = np.random.default_rng(a.seed)
    t_train = time.time()
    run = []
    for step in range(1, a.steps + 1):
        starts = rng.integers(0, len(train) - a.ctx - 1, a.batch)
        xb = np.stack([train[s:s + a.ctx] for s in starts])
        yb = np.stack([train[s + 1:s + a.ctx + 1] for s in starts])
        key, k = jax.random.split(key)
        params, opt_state, loss = train_step(params, opt_state, jnp.asarray(xb),
                                             jnp.asarray(yb), k)
        run.append(float(loss))
        if step % a.eval_every == 0 or step == a.steps:
            vl = split_loss(params, val)
            log(f"step {step:5d}  lr {float(sched(step)):.2e}  train {np.mean(run):.4f} "
                f"(mean of the last {len(run)} steps, dropout on)  val {vl:.4f}  "
                f"{time.time() - t_train:7.1f} s")
            run = []
    train_s = time.time() - t_train
    final_train, final_val = split_loss(params, train), split_loss(params, val)
    cpt, cpv = len(train_text) / len(train), len(val_text) / len(val)
    log(f"final: train loss {final_train:.4f} nats/token ({final_train / cpt:.4f} /char), "
        f"val loss {final_val:.4f} nats/token ({final_val / cpv:.4f} /char), "
        f"over all {a.ctx}-token windows, no dropout; training {train_s:.0f} s")

    # 4. The checkpoint.
    weights = {k: np.asarray(v, np.float32) for k, v in params.items()}
    assert not weights["wte"][V:].any(), "padding rows of wte must stay zero"
    path = out / "model.bin"
    gpt2_io.write_llmc(path, cfg, weights, "f32")
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise SystemExit(f"{path}: {size} bytes, over the {MAX_BYTES} limit")
    log(f"checkpoint: {path.relative_to(REPO) if path.is_relative_to(REPO) else path} "
        f"{size:,} bytes (llm.c version 3, V {V}, Vp {Vp}); encoder.json "
        f"{(out / 'encoder.json').stat().st_size:,} bytes, vocab.bpe "
        f"{(out / 'vocab.bpe').stat().st_size:,} bytes")

    # 5. Reload with the NumPy reference; check the export; sample.
    ref = gpt2.Model.load(path)
    x, y = windows(val, a.ctx)
    nll = []
    for i in range(min(8, len(x))):
        lg = ref.forward(x[i]).logits.astype(np.float64)
        lse = np.log(np.exp(lg - lg.max(-1, keepdims=True)).sum(-1)) + lg.max(-1)
        nll.append(np.mean(lse - lg[np.arange(a.ctx), y[i]]))
    jl = split_loss(params, val, limit=min(8, len(x)))
    log(f"export check: NumPy reference on model.bin, val loss of the first {len(nll)} "
        f"windows {np.mean(nll):.5f}, JAX on the same windows {jl:.5f}")
    prompt_text = "ROMEO:\n"
    prompt = enc.encode_ordinary(prompt_text)
    n_new = min(200, a.ctx - len(prompt))
    greedy = gpt2.generate(ref, prompt, n_new)
    log(f"\nsample (NumPy reference, greedy, prompt {prompt_text!r} = ids {prompt}, "
        f"{n_new} tokens):\n{enc.decode(greedy)}\n")
    samp = gpt2.generate(ref, prompt, n_new,
                         gpt2.Sampler(greedy=False, temperature=0.8, top_k=40, seed=a.seed))
    log(f"sample (NumPy reference, temperature 0.8, top-k 40, numpy seed {a.seed}):\n"
        f"{enc.decode(samp)}\n")
    log(f"greedy ids: {','.join(map(str, greedy[len(prompt):]))}")
    log(f"wall time: {time.time() - t_start:.0f} s in all")
    with open(out / "train_config.json", "w") as f:
        args = dict(vars(a), out=str(out.relative_to(REPO)) if out.is_relative_to(REPO)
                    else str(out))
        json.dump({"args": args, "config": cfg.__dict__, "final_train_loss": final_train,
                   "final_val_loss": final_val, "prompt_ids": prompt,
                   "greedy_ids": greedy[len(prompt):]}, f, indent=2)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
