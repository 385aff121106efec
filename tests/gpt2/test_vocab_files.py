"""Bad vocabulary files: each must make the tokenizer (the ASan+UBSan build of gpt2_tok) fail
with a message naming the file and what is wrong, and never crash or read out of bounds.

Most cases start from a small but real vocabulary (GPT-2's 256 byte tokens and first 300
merges) so each run is quick; truncations run over the full GPT-2 files too."""
import json
import os

import pytest

from gpt2_testlib import VOCAB_DIR, no_sanitizer_report, report, run

N_MERGES = 300


def load_small():
    with open(os.path.join(VOCAB_DIR, "encoder.json"), encoding="utf-8") as f:
        full = json.load(f)
    with open(os.path.join(VOCAB_DIR, "vocab.bpe"), encoding="utf-8") as f:
        lines = f.read().split("\n")
    enc = {k: v for k, v in full.items() if v < 256 + N_MERGES}
    enc["<|endoftext|>"] = 256 + N_MERGES
    return enc, lines[:1 + N_MERGES]


def write(d, enc_text, bpe_text):
    d.mkdir(exist_ok=True)
    if enc_text is not None:
        (d / "encoder.json").write_bytes(enc_text if isinstance(enc_text, bytes)
                                         else enc_text.encode())
    if bpe_text is not None:
        (d / "vocab.bpe").write_bytes(bpe_text if isinstance(bpe_text, bytes)
                                      else bpe_text.encode())
    return d


def dumps(enc):
    return json.dumps(enc, ensure_ascii=False)


def load(tool, d, data=b"hello world"):
    p = run([tool, "--vocab", str(d), "encode"], data)
    no_sanitizer_report(p)
    return p


def renumber(enc):
    return {k: i for i, (k, _) in enumerate(sorted(enc.items(), key=lambda kv: kv[1]))}


def case_enc(name):
    """encoder.json mutations -> (text, words the message must contain)."""
    enc, _ = load_small()
    first = next(k for k, v in enc.items() if v == 0)
    if name == "empty":
        return "", ["encoder.json", "ends early"]
    if name == "not_object":
        return "[1, 2, 3]", ["encoder.json", "object"]
    if name == "garbage":
        return "{\"a\": 1,, }", ["encoder.json", "bad JSON", "line 1"]
    if name == "id_string":
        enc[first] = "0"
        return dumps(enc), ["encoder.json", first, "not a number"]
    if name == "id_fraction":
        enc[first] = 0.5
        return dumps(enc), ["encoder.json", "not an integer"]
    if name == "id_negative":
        enc[first] = -1
        return dumps(enc), ["encoder.json", "-1"]
    if name == "id_too_big":
        enc[first] = 10 ** 6
        return dumps(enc), ["encoder.json", "1000000", "0..N-1"]
    if name == "id_twice":
        enc[first] = 1
        return dumps(enc), ["encoder.json", "id 1", "two tokens"]
    if name == "key_twice":
        text = dumps(enc)
        return text[:-1] + ', "%s": %d}' % (first, len(enc)), ["encoder.json", "appears twice"]
    if name == "outside_alphabet":
        del enc["<|endoftext|>"]
        enc["中"] = 256 + N_MERGES
        return dumps(enc), ["encoder.json", "outside GPT-2's byte alphabet"]
    if name == "empty_key":
        del enc["<|endoftext|>"]
        enc[""] = 256 + N_MERGES
        return dumps(enc), ["encoder.json", "empty token"]
    if name == "no_byte_token":
        # Drop the token of byte '~' and renumber, so ids stay dense.
        del enc["~"]
        return dumps(renumber(enc)), ["encoder.json", "byte 0x7e"]
    raise KeyError(name)


ENC_CASES = ["empty", "not_object", "garbage", "id_string", "id_fraction", "id_negative",
             "id_too_big", "id_twice", "key_twice", "outside_alphabet", "empty_key",
             "no_byte_token"]


@pytest.mark.parametrize("name", ENC_CASES)
def test_bad_encoder_json(gpt2_tok_asan, tmp_path, name):
    text, words = case_enc(name)
    _, lines = load_small()
    d = write(tmp_path / name, text, "\n".join(lines) + "\n")
    p = load(gpt2_tok_asan, d)
    msg = p.stderr.decode(errors="replace")
    assert p.returncode == 1, msg
    for w in words:
        assert w in msg, f"{w!r} not in {msg!r}"
    assert str(d / "encoder.json") in msg


def case_bpe(name, lines):
    if name == "no_version":
        return "\n".join(lines[1:]) + "\n", ["vocab.bpe", "line 1", "#version"]
    if name == "three_tokens":
        return "\n".join(lines[:5] + ["Ġ t h"] + lines[5:]) + "\n", ["line 6", "'Ġ t h'"]
    if name == "one_token":
        return "\n".join(lines[:5] + ["Ġt"] + lines[5:]) + "\n", ["line 6", "expected a merge"]
    if name == "empty_line":
        return "\n".join(lines[:5] + [""] + lines[5:]) + "\n", ["line 6", "empty line"]
    if name == "unknown_part":
        return "\n".join(lines[:5] + ["Ġzzzq t"] + lines[5:]) + "\n", \
            ["line 6", "'Ġzzzq' is not in"]
    if name == "missing_merge_result":
        # A merge whose result is not a token: "a vocab with a missing merge".
        return "\n".join(lines[:5] + ["q q"] + lines[5:]) + "\n", \
            ["line 6", "merge 'q q' makes 'qq', which is not in", "encoder.json"]
    if name == "repeated":
        return "\n".join(lines + [lines[3]]) + "\n", ["repeats line 4"]
    if name == "nul_byte":
        return ("\n".join(lines[:5] + ["a\0 b"] + lines[5:]) + "\n"), ["line 6"]
    raise KeyError(name)


BPE_CASES = ["no_version", "three_tokens", "one_token", "empty_line", "unknown_part",
             "missing_merge_result", "repeated", "nul_byte"]


@pytest.mark.parametrize("name", BPE_CASES)
def test_bad_vocab_bpe(gpt2_tok_asan, tmp_path, name):
    enc, lines = load_small()
    text, words = case_bpe(name, lines)
    d = write(tmp_path / name, dumps(enc), text)
    p = load(gpt2_tok_asan, d)
    msg = p.stderr.decode(errors="replace")
    assert p.returncode == 1, msg
    assert str(d / "vocab.bpe") in msg
    for w in words:
        assert w in msg, f"{w!r} not in {msg!r}"


def test_missing_files(gpt2_tok_asan, tmp_path):
    enc, lines = load_small()
    d = write(tmp_path / "noenc", None, "\n".join(lines) + "\n")
    p = load(gpt2_tok_asan, d)
    assert p.returncode == 1 and "encoder.json: cannot open" in p.stderr.decode(errors="replace")
    d = write(tmp_path / "nobpe", dumps(enc), None)
    p = load(gpt2_tok_asan, d)
    assert p.returncode == 1 and "vocab.bpe: cannot open" in p.stderr.decode(errors="replace")


def test_small_vocab_loads(gpt2_tok_asan, tmp_path):
    """The base of the cases above is itself good, so each failure is the mutation's."""
    enc, lines = load_small()
    d = write(tmp_path / "good", dumps(enc), "\n".join(lines) + "\n")
    p = load(gpt2_tok_asan, d, b"hello <|endoftext|>")
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    # and without the final newline, the last merge still counts
    d2 = write(tmp_path / "nonl", dumps(enc), "\n".join(lines))
    p2 = load(gpt2_tok_asan, d2, b"hello <|endoftext|>")
    assert p2.returncode == 0 and p2.stdout == p.stdout


def test_truncated_files(gpt2_tok_asan, tmp_path):
    """GPT-2's own files cut at many places: a cut encoder.json is always bad JSON; a cut
    vocab.bpe is either a shorter valid merge list or a clear error. No crash either way."""
    enc_full = open(os.path.join(VOCAB_DIR, "encoder.json"), "rb").read()
    bpe_full = open(os.path.join(VOCAB_DIR, "vocab.bpe"), "rb").read()
    n_err = n_ok = 0
    for i, cut in enumerate([1, 2, 100, 4097, len(enc_full) // 2, len(enc_full) - 2,
                             len(enc_full) - 1]):
        d = write(tmp_path / f"e{i}", enc_full[:cut], bpe_full)
        p = load(gpt2_tok_asan, d)
        msg = p.stderr.decode(errors="replace")
        assert p.returncode == 1 and str(d / "encoder.json") in msg and "JSON" in msg, msg
        n_err += 1
    for i, cut in enumerate([1, 5, 14, 15, 16, 1000, len(bpe_full) // 3, len(bpe_full) - 3]):
        d = write(tmp_path / f"b{i}", enc_full, bpe_full[:cut])
        p = load(gpt2_tok_asan, d)
        msg = p.stderr.decode(errors="replace")
        if p.returncode == 0:
            n_ok += 1
        else:
            assert p.returncode == 1 and str(d / "vocab.bpe") in msg, msg
            n_err += 1
    report(f"truncated vocab files: {n_err} clear errors, {n_ok} loaded as shorter merge "
           f"lists, no sanitizer report")
