"""Learns a byte-level BPE vocabulary and writes it in GPT-2's own file format.

Learning is Hugging Face `tokenizers` (ByteLevelBPETokenizer: GPT-2's byte-to-unicode
mapping and GPT-2's pre-tokenizer regex, no prefix space). The files it writes
(vocab.json / merges.txt) number tokens in its own order, which GPT-2 tools do not
accept, so the vocabulary is re-numbered the way OpenAI's encoder.json is:

    ids 0..255        the 256 single bytes, in bytes_to_unicode order ('!' = 0, ..., 'Ā' for
                      byte 0 = 188, ...), each written as its unicode stand-in
    ids 256..256+M-1  merge i of vocab.bpe makes token 256 + i (first + second)
    id  256+M         <|endoftext|>, the last id

    vocab.bpe: "#version: 0.2", then one merge per line ("Ġ t"), ending in a newline.

Invariant checked by `check`: every merge makes a new token (no two merges concatenate to
the same string), so rank == id, which is what tiktoken's data_gym loader asserts; and
tiktoken built from the two files encodes the given text to the same ids as `tokenizers`
loaded from the same two files (two independent BPE implementations: tokenizers merges
pairs by merge rank, tiktoken merges by the rank of the concatenated token).
"""

import json
import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "tests" / "reference"))
import gpt2  # noqa: E402  (GPT2_PATTERN, load_tokenizer: tiktoken from the two files)

EOT = "<|endoftext|>"


def bytes_to_unicode():
    """GPT-2's map from byte value to the printable character that stands for it."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
          + list(range(ord("®"), ord("ÿ") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


def learn(text, vocab_size):
    """Merges (list of (first, second) in rank order) for |vocab_size| ids in all.

    |vocab_size| counts the 256 bytes, the merges and <|endoftext|>.
    """
    from tokenizers import ByteLevelBPETokenizer

    tok = ByteLevelBPETokenizer(add_prefix_space=False)
    tok.train_from_iterator([text], vocab_size=vocab_size - 1, min_frequency=2,
                            show_progress=False, special_tokens=[])
    model = json.loads(tok._tokenizer.to_str())["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    if len(merges) != vocab_size - 257:
        raise RuntimeError(f"tokenizers learned {len(merges)} merges, wanted "
                           f"{vocab_size - 257} (text too small for the vocabulary?)")
    return merges


def encoder_of(merges):
    """GPT-2 encoder.json contents (token string -> id) for |merges|."""
    enc = {ch: i for i, ch in enumerate(bytes_to_unicode().values())}
    for first, second in merges:
        tok = first + second
        if tok in enc:
            raise RuntimeError(f"merge {first!r} {second!r} remakes token {tok!r}: rank != id")
        if first not in enc or second not in enc:
            raise RuntimeError(f"merge {first!r} {second!r} uses a token not made yet")
        enc[tok] = len(enc)
    enc[EOT] = len(enc)
    return enc


def write(folder, merges):
    """Writes folder/encoder.json and folder/vocab.bpe; returns the encoder."""
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    enc = encoder_of(merges)
    with open(folder / "encoder.json", "w", encoding="utf-8") as f:
        json.dump(enc, f, ensure_ascii=False)
    with open(folder / "vocab.bpe", "w", encoding="utf-8", newline="\n") as f:
        f.write("#version: 0.2\n")
        for first, second in merges:
            f.write(f"{first} {second}\n")
    return enc


def check(folder, texts):
    """tiktoken vs tokenizers on each of |texts| (both built from |folder|'s two files).

    Returns the number of ids compared; raises on the first difference.
    """
    from tokenizers import ByteLevelBPETokenizer

    folder = pathlib.Path(folder)
    tk = gpt2.load_tokenizer(folder)
    hf = ByteLevelBPETokenizer(str(folder / "encoder.json"), str(folder / "vocab.bpe"),
                               add_prefix_space=False)
    n = 0
    for i, t in enumerate(texts):
        a, b = tk.encode_ordinary(t), hf.encode(t).ids
        if a != b:
            j = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            raise RuntimeError(f"text {i}: tiktoken and tokenizers differ at id {j}: "
                               f"{a[j:j + 5]} vs {b[j:j + 5]} ({tk.decode(a[j:j + 5])!r})")
        if tk.decode(a) != t:
            raise RuntimeError(f"text {i}: tiktoken does not round-trip")
        n += len(a)
    return n
