"""test_gpt2_bundled.py — the committed Shakespeare model (examples/gpt2/data/shakespeare).

Checks what the C program relies on, against tools we did not write:
  - model.bin is an llm.c version 3 checkpoint of at most 8 MB whose V is the vocabulary's
    size, padded to a multiple of 128, with zero padding rows;
  - encoder.json + vocab.bpe load in tiktoken's GPT-2 loader (which asserts rank == id),
    <|endoftext|> is the last id, and tiktoken and Hugging Face `tokenizers`, both built
    from the two files, give the same ids on the validation text and hostile strings;
  - the NumPy reference on model.bin reproduces the validation loss that JAX computed
    during training on the same windows (the log's export check), and the greedy
    continuation recorded in train_config.json.
"""

import json
import pathlib
import re
import sys

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
MODEL = REPO / "examples" / "gpt2" / "data" / "shakespeare"
TEXT = REPO / "examples" / "gpt2" / "data" / "tinyshakespeare" / "input.txt"
sys.path.insert(0, str(REPO / "tests" / "reference"))
sys.path.insert(0, str(REPO / "examples" / "gpt2" / "train"))
import gpt2  # noqa: E402
import gpt2_io  # noqa: E402


@pytest.fixture(scope="module")
def meta():
    return json.loads((MODEL / "train_config.json").read_text())


def val_text():
    text = TEXT.read_text(encoding="utf-8")
    return text[text.rfind("\n", 0, int(len(text) * 0.9)) + 1:]


def test_checkpoint_header_and_size():
    path = MODEL / "model.bin"
    assert path.stat().st_size <= 8 * 1024 * 1024
    cfg, w = gpt2_io.read_llmc(path)
    enc = json.loads((MODEL / "encoder.json").read_text(encoding="utf-8"))
    assert cfg.vocab_size == len(enc) and enc["<|endoftext|>"] == len(enc) - 1
    assert cfg.padded_vocab_size == gpt2_io.padded_vocab(cfg.vocab_size)
    assert not w["wte"][cfg.vocab_size:].any()
    assert np.frombuffer(path.read_bytes()[:8], "<i4")[1] == 3


def test_vocab_files_agree_in_tiktoken_and_tokenizers():
    pytest.importorskip("tiktoken")
    pytest.importorskip("tokenizers")
    import bpe
    from train import HOSTILE

    assert (MODEL / "vocab.bpe").read_text(encoding="utf-8").startswith("#version: 0.2\n")
    n = bpe.check(MODEL, [val_text()[:30000]] + HOSTILE)
    assert n > 5000


def test_reference_reproduces_logged_loss_and_greedy(meta):
    """The log's export check: the first 8 validation windows, as JAX scored them."""
    pytest.importorskip("tiktoken")
    log = (MODEL / "train_log.txt").read_text(encoding="utf-8")
    hit = re.search(r"^export check: .* first (\d+) windows ([0-9.]+), JAX on the same "
                    r"windows ([0-9.]+)", log, re.M)
    n, jax_loss = int(hit.group(1)), float(hit.group(3))
    enc = gpt2.load_tokenizer(MODEL)
    m = gpt2.Model.load(MODEL / "model.bin")
    T = m.cfg.max_seq_len
    ids = np.asarray(enc.encode_ordinary(val_text()), np.int64)
    nll = []
    for i in range(n):
        x, y = ids[i * T:(i + 1) * T], ids[i * T + 1:(i + 1) * T + 1]
        lg = m.forward(x).logits.astype(np.float64)
        mx = lg.max(-1)
        nll.append(np.mean(np.log(np.exp(lg - mx[:, None]).sum(-1)) + mx - lg[np.arange(T), y]))
    assert abs(np.mean(nll) - jax_loss) < 2e-5, (np.mean(nll), jax_loss)
    got = gpt2.generate(m, meta["prompt_ids"], 40)
    assert got[len(meta["prompt_ids"]):] == meta["greedy_ids"][:40]
