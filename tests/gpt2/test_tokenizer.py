"""The C GPT-2 tokenizer (examples/gpt2/bpe.c, through build/examples/gpt2_tok) against
tiktoken built from the same two local files (no network).

Strings are generated with a fixed seed: hand-picked edge cases, contractions (upper case
too), whitespace runs, digits, many scripts, emoji, combining marks, random code points,
code, tinyshakespeare excerpts, "<|endoftext|>" in text, and byte strings with invalid
UTF-8. Every valid string is compared in both modes (encode_ordinary, and
encode(allowed_special="all") against --special); the mismatch count is printed at the end
of the run and must be 0. For invalid UTF-8 the reference is bpe.h's rule built from
tiktoken: tiktoken's encode_ordinary of each maximal valid run, and tiktoken's own one-byte
token for each invalid byte. (tiktoken's private Encoding._encode_bytes is not used: it BPEs
the last valid piece together with all bytes from the first invalid one on, in one piece,
which its source says "may not be correct".)
"""
import json
import os
import random
import re

import pytest
import tiktoken
import tiktoken.load

from gpt2_testlib import ROOT, VOCAB_DIR, no_sanitizer_report, report, run

PAT = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
EOT = "<|endoftext|>"
SEED = 20261201


def tiktoken_encoding(vocab_dir, eot_id=50256, name="gpt2_local"):
    ranks = tiktoken.load.data_gym_to_mergeable_bpe_ranks(
        os.path.join(vocab_dir, "vocab.bpe"), os.path.join(vocab_dir, "encoder.json"))
    specials = {EOT: eot_id} if eot_id is not None else {}
    return tiktoken.Encoding(name=name, pat_str=PAT, mergeable_ranks=ranks,
                             special_tokens=specials)


@pytest.fixture(scope="module")
def enc():
    return tiktoken_encoding(VOCAB_DIR)


# ---- the strings ------------------------------------------------------------------------

FIXED = [
    "", " ", "  ", "   ", "\n", "\n\n", "\n\n\n\n", " \n", "\n ", " \n ", "\t", "\t\t", "\r\n",
    "\r\n\r\n", "a b", "a  b", "a   b", "a \n b", "a\n\nb", "trailing   ", "   leading",
    "  both  ", "x\t\ty", "tab\t", " \t \t", "\x0b\x0c", "\u3000", "a\u3000b", "\u00a0x",
    "x\u00a0", "\u2028", "a\u2029b", "\x85", "a\x85b", "\u180e", "a\u180e b", "\x1c\x1d\x1e\x1f",
    "x\u200by", "\u200d", "\ufeffBOM", "\u2009thin\u2009space", "  \u3000 \n",
    "hello world", "Hello world", "HELLO WORLD", "hello, world!", "Hello, World!!!",
    "I'm", "you'll", "they've", "we're", "she'd", "it's", "don't", "I'M", "YOU'LL", "THEY'VE",
    "WE'RE", "SHE'D", "IT'S", "DON'T", "'S", "'s", "'t", "'re", "'ve", "'m", "'ll", "'d",
    "''s", "'''", "' s", "rock'n'roll", "o'clock", "'ll've", "Y'all'd've", "ma'am",
    "l'homme", "dell'arte", "\u2019s it\u2019s", "``quoted''", "'quoted'", "\"quoted\"",
    "1234567890", " 2024", "3.14159", "1,000,000", "-42", "+1e-10", "0x1F", "٣٤٥", "१२३",
    "１２３", "Ⅻ", "½", "x²", "①②③", "𝟘𝟙𝟚",
    "naïve café", "e\u0301", "cafe\u0301", "Zalgo: Z\u0351\u0353\u0308a\u0300\u0301l",
    "नमस्ते दुनिया", "สวัสดีครับ", "שָׁלוֹם", "مرحبا بالعالم", "Привет, мир!", "Γειά σου Κόσμε",
    "你好，世界", "こんにちは世界", "カタカナ", "안녕하세요 세계", "გამარჯობა", "Բարեւ",
    "ሰላም ልዑል", "ᏣᎳᎩ", "Ꙛ", "𐍈", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
    "👍", "👍🏽", "👨‍👩‍👧‍👦", "🇯🇵🇫🇷", "1️⃣", "❤️", "🏳️‍🌈", "emoji 🎉 in text 🚀!",
    "<|endoftext|>", "a<|endoftext|>b", "<|endoftext|><|endoftext|>", " <|endoftext|> ",
    "<|endoftext", "endoftext|>", "<|endoftext|>|>", "<<|endoftext|>", "<| endoftext |>",
    "<|ENDOFTEXT|>", "\n<|endoftext|>\n",
    "int main(void) { return 0; }", "for (int i = 0; i < n; i++) x[i] += y[i];",
    "def f(x):\n    return x ** 2\n", "if __name__ == '__main__':\n\tmain()\n",
    '{"key": [1, 2.5, null, true], "s": "\\u00e9"}', "SELECT * FROM t WHERE a='b';",
    "#include <stdio.h>\n", "$ ls -la | grep '^d' > /dev/null 2>&1",
    "https://example.com/path?q=1&r=2#frag", "user@example.com", "C:\\Windows\\System32",
    "...", "!!!", "?!", "--", "—", "–", "…", "«»", "„“", "¿Qué?", "¡Hola!",
]

SCRIPTS = {
    "latin": "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZéèêëàâäôöûüçñßøåæœÉÀÇ",
    "cyrillic": "абвгдеёжзийклмнопрстуфхцчшщъыьэюяАБВГДЕЁЖЗИЙКЛМНОП",
    "greek": "αβγδεζηθικλμνξοπρστυφχψωΑΒΓΔΕΖΗΘΙΚΛΜΝΞΟΠΡΣΤΥΦΧΨΩάέήίόύώ",
    "arabic": "ابتثجحخدذرزسشصضطظعغفقكلمنهويءآأؤإئ",
    "hebrew": "אבגדהוזחטיכלמנסעפצקרשת",
    "devanagari": "अआइईउऊएऐओऔकखगघचछजझटठडढणतथदधनपफबभमयरलवशषसह्ािीुूेैोौंः",
    "thai": "กขคฆงจฉชซฌญฎฏฐฑฒณดตถทธนบปผฝพฟภมยรลวศษสหฬอฮะัาำิีึืุู่้๊๋",
    "cjk": "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年",
    "kana": "あいうえおかきくけこさしすせそアイウエオカキクケコサシスセソー",
    "hangul": "가나다라마바사아자차카타파하한국어세계",
    "georgian": "აბგდევზთიკლმნოპჟრსტუფქღყშჩცძწჭხჯჰ",
    "ethiopic": "ሀለሐመሠረሰቀበተኀነአከወዐዘየደገጠጰጸፀፈፐ",
    "combining": "\u0300\u0301\u0302\u0303\u0308\u030a\u0327\u0331\u0345\u035c\u20d7",
    "emoji": "😀😂🥲😍🤔👍👎🙏🔥🎉🚀❤✨🌍🍕🐍",
    "modifiers": "\U0001f3fb\U0001f3fc\U0001f3fd\U0001f3fe\U0001f3ff\u200d\ufe0f\u20e3",
    "digits": "0123456789٠١٢٣٤٥٦٧٨٩०१२३४५६७८९０１２３４５６７８９Ⅰ Ⅱ Ⅲ ½¼²³",
    "punct": "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~¡¿«»—–…‘’“”•·§¶©®™°±×÷",
    "space": " \t\n\r\x0b\x0c\x85\xa0\u1680\u2000\u2003\u2009\u200a\u2028\u2029\u202f\u205f\u3000",
}
WS_ATOMS = [" ", " ", "  ", "\t", "\n", "\n", "\r\n", "\n\n", "\u3000", "\xa0", "\u2009",
            "\x0b", "\x0c", "\x85", "\u2028", "\u180e", "\x1c"]
WORDS = ["the", "The", "and", "of", "to", "a", "in", "is", "you", "that", "it", "he", "was",
         "for", "on", "are", "as", "with", "his", "they", "I", "at", "be", "this", "have",
         "from", "or", "one", "had", "by", "word", "but", "not", "what", "all", "were", "we",
         "when", "your", "can", "said", "there", "use", "an", "each", "which", "she", "do",
         "how", "their", "if", "will", "up", "other", "about", "out", "many", "then", "them",
         "Shakespeare", "ROMEO", "JULIET", "thou", "thee", "hath", "doth", "wherefore"]
CONTRACTION_SUFFIXES = ["s", "t", "re", "ve", "m", "ll", "d", "S", "T", "RE", "VE", "M", "LL",
                        "D", "Re", "rE", "x", "", "'", "s's", "ll'd"]


def random_cp(rng):
    while True:
        c = rng.choice([rng.randint(0, 0x7f), rng.randint(0x80, 0x7ff), rng.randint(0x800, 0xffff),
                        rng.randint(0x10000, 0x10ffff), rng.randint(0x1f300, 0x1faff)])
        if not 0xd800 <= c <= 0xdfff:
            return chr(c)


def code_slices(rng, n):
    files = []
    for d in ("examples/gpt2", "tests/gpt2", "tools", "examples"):
        full = os.path.join(ROOT, d)
        for f in sorted(os.listdir(full)):
            if f.endswith((".c", ".h", ".py", ".sh", ".mk")):
                with open(os.path.join(full, f), encoding="utf-8", errors="replace") as fh:
                    files.append(fh.read())
    out = []
    for _ in range(n):
        t = rng.choice(files)
        a = rng.randrange(len(t))
        out.append(t[a:a + rng.randint(1, 1500)])
    return out


def make_strings(shakespeare):
    """(category, text) pairs; deterministic for a given checkout."""
    rng = random.Random(SEED)
    out = [("fixed", s) for s in FIXED]
    for _ in range(120):
        w = rng.choice(WORDS)
        s = rng.choice(["", " ", "  "]) + w + rng.choice(["'", "\u2019", "'"]) + \
            rng.choice(CONTRACTION_SUFFIXES) + rng.choice(["", " ", ".", "!", " x", "'s", "\n"])
        out.append(("contractions", s))
    for _ in range(120):
        parts = []
        for _ in range(rng.randint(1, 30)):
            r = rng.random()
            if r < 0.45:
                parts.append(rng.choice(WS_ATOMS) * rng.choice([1, 1, 2, 3, 7, 40]))
            elif r < 0.85:
                parts.append(rng.choice(WORDS))
            else:
                parts.append(rng.choice(["1", "42", "!", "'s", "(", ")", "é", "中"]))
        if rng.random() < 0.2:
            parts.append(rng.choice(WS_ATOMS) * rng.randint(50, 3000))  # long trailing run
        out.append(("whitespace", "".join(parts)))
    for _ in range(60):
        s = "".join(rng.choice([rng.choice(SCRIPTS["digits"]), str(rng.randint(0, 10**9)), " ",
                                ".", ",", "-", "e", "x"]) for _ in range(rng.randint(1, 15)))
        out.append(("digits", s))
    names = [k for k in SCRIPTS if k != "space"]
    for _ in range(180):
        parts = []
        for _ in range(rng.randint(1, 12)):
            alpha = SCRIPTS[rng.choice(names)]
            parts.append("".join(rng.choice(alpha) for _ in range(rng.randint(1, 8))))
            parts.append(rng.choice([" ", " ", "", "\n", ", ", ". ", "\u3000", "  "]))
        out.append(("scripts", "".join(parts)))
    for _ in range(150):
        out.append(("random_cp", "".join(random_cp(rng) for _ in range(rng.randint(1, 40)))))
    for _ in range(100):
        alpha = [chr(c) for c in range(32, 127)] + [" "] * 10 + ["\n", "\t"]
        out.append(("ascii", "".join(rng.choice(alpha) for _ in range(rng.randint(1, 200)))))
    out += [("code", s) for s in code_slices(rng, 80)]
    text = shakespeare.decode("ascii")
    for _ in range(200):
        a = rng.randrange(len(text))
        out.append(("shakespeare", text[a:a + rng.randint(1, 3000)]))
    for _ in range(60):
        parts = []
        for _ in range(rng.randint(1, 6)):
            parts.append(rng.choice([EOT, EOT, " " + EOT, "<|endoftext", "|>", "<|", EOT + EOT]))
            parts.append(rng.choice(["", " ", "\n", "hello", text[:rng.randint(0, 80)]]))
        out.append(("eot", "".join(parts)))
    return out


# Invalid UTF-8 fragments: stray continuations, truncated sequences, overlongs, surrogates,
# code points past U+10FFFF, bytes that never occur in UTF-8.
BAD_BYTES = [b"\x80", b"\xbf", b"\xc0\x80", b"\xc1\xbf", b"\xe0\x80\x80", b"\xf0\x80\x80\x80",
             b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80",
             b"\xff", b"\xfe", b"\xc3", b"\xe2\x82", b"\xf0\x9f\x98", b"\xe2", b"\xf0\x9f"]


def make_byte_strings(strings):
    rng = random.Random(SEED + 1)
    out = []
    valid = [s.encode() for c, s in strings if s and c != "eot"]
    for _ in range(120):  # valid text with invalid fragments spliced in
        b = bytearray(rng.choice(valid)[:300])
        for _ in range(rng.randint(1, 5)):
            at = rng.randint(0, len(b))
            b[at:at] = rng.choice(BAD_BYTES)
        out.append(bytes(b))
    for _ in range(60):  # uniformly random bytes
        out.append(bytes(rng.randrange(256) for _ in range(rng.randint(1, 100))))
    for _ in range(40):  # a valid string cut inside a multibyte character
        b = rng.choice(valid)
        out.append(b[:rng.randint(1, len(b))] + rng.choice([b"", b" ", b"\xa0", b"abc"]))
    out += [b"abc\xff", b"\xffabc", b"  \xff", b"\xff  ", b"hello \x80world", b"it'\xffs",
            b"\xe2\x80", b"\xe2\x80 \xe2\x80\x99s", b" \xc3 \xa9", b"\xf0\x9f\x98\xf0\x9f\x98\x80"]
    return out


# ---- running the C tokenizer ------------------------------------------------------------

def records(items):
    return b"".join(b"%d\n" % len(b) + b for b in items)


def c_encode_batch(tool, items, special=False, vocab=VOCAB_DIR):
    cmd = [tool, "--vocab", vocab] + (["--special"] if special else []) + ["encode-batch"]
    p = run(cmd, records(items))
    assert p.returncode == 0, p.stderr.decode()
    lines = p.stdout.decode().split("\n")
    assert lines[-1] == "" and len(lines) == len(items) + 1
    return [[int(x) for x in l.split()] for l in lines[:-1]]


def c_decode_batch(tool, id_lists, vocab=VOCAB_DIR):
    data = "".join(" ".join(map(str, ids)) + "\n" for ids in id_lists).encode()
    p = run([tool, "--vocab", vocab, "decode-batch"], data)
    assert p.returncode == 0, p.stderr.decode()
    out, at, buf = [], 0, p.stdout
    while at < len(buf):
        nl = buf.index(b"\n", at)
        n = int(buf[at:nl])
        out.append(buf[nl + 1:nl + 1 + n])
        at = nl + 1 + n
    return out


def expected_bytes(enc, b):
    """bpe.h's rule for arbitrary bytes, from tiktoken: maximal valid UTF-8 runs encoded by
    tiktoken, each invalid byte its one-byte token."""
    ids, i = [], 0
    while i < len(b):
        try:
            ids += enc.encode_ordinary(b[i:].decode("utf-8"))
            break
        except UnicodeDecodeError as e:
            ids += enc.encode_ordinary(b[i:i + e.start].decode("utf-8"))
            ids += [enc.encode_single_token(bytes([x])) for x in b[i + e.start:i + e.end]]
            i += e.end
    return ids


# ---- tests ------------------------------------------------------------------------------

def test_known_ids(gpt2_tok):
    # The examples of examples/gpt2/data/gpt2-bpe/NOTICE.md.
    got = c_encode_batch(gpt2_tok, [b"hello world", b"Hello world"])
    assert got == [[31373, 995], [15496, 995]]
    assert c_encode_batch(gpt2_tok, [b"hello <|endoftext|>"], special=True) == [[31373, 220, 50256]]
    assert 50256 not in c_encode_batch(gpt2_tok, [b"hello <|endoftext|>"])[0]


def test_encode_matches_tiktoken(gpt2_tok, enc, shakespeare):
    strings = make_strings(shakespeare)
    items = [s.encode() for _, s in strings]
    ordinary = c_encode_batch(gpt2_tok, items)
    special = c_encode_batch(gpt2_tok, items, special=True)
    bad, per_cat = [], {}
    for (cat, s), a, b in zip(strings, ordinary, special):
        ok = a == enc.encode_ordinary(s) and b == enc.encode(s, allowed_special="all")
        per_cat.setdefault(cat, [0, 0])
        per_cat[cat][0] += 1
        if not ok:
            per_cat[cat][1] += 1
            bad.append((cat, s[:80]))
    cats = ", ".join(f"{c} {n}" + (f" ({m} bad)" if m else "") for c, (n, m) in per_cat.items())
    report(f"tokenizer vs tiktoken: {len(strings)} strings x 2 modes, {len(bad)} mismatches "
           f"[{cats}]")
    assert len(strings) >= 1000
    assert not bad, f"{len(bad)} mismatches, first: {bad[:5]}"


def test_invalid_utf8_bytes(gpt2_tok, enc, shakespeare):
    items = make_byte_strings(make_strings(shakespeare))
    n_invalid = 0
    got = c_encode_batch(gpt2_tok, items)
    bad = []
    for b, ids in zip(items, got):
        try:
            b.decode("utf-8")
        except UnicodeDecodeError:
            n_invalid += 1
        if ids != expected_bytes(enc, b):
            bad.append(b[:60])
        # tiktoken reads our ids back to the same bytes, and to the same text as Python's
        # decoding with replacement.
        assert enc.decode_bytes(ids) == b
        assert enc.decode(ids, errors="replace") == b.decode("utf-8", errors="replace")
    report(f"invalid UTF-8: {len(items)} byte strings ({n_invalid} invalid), {len(bad)} "
           f"mismatches against tiktoken per valid run + one-byte tokens")
    assert n_invalid >= 150
    assert not bad, f"{len(bad)} mismatches, first: {bad[:5]}"


def test_roundtrip(gpt2_tok, shakespeare):
    strings = make_strings(shakespeare)
    items = [s.encode() for _, s in strings] + make_byte_strings(strings)
    for special in (False, True):
        ids = c_encode_batch(gpt2_tok, items, special=special)
        back = c_decode_batch(gpt2_tok, ids)
        bad = [x for x, y in zip(items, back) if x != y]
        assert not bad, f"decode(encode(x)) != x for {len(bad)} of {len(items)}: {bad[:3]}"


def test_whole_shakespeare(gpt2_tok, enc, shakespeare):
    p = run([gpt2_tok, "--vocab", VOCAB_DIR, "encode"], shakespeare)
    assert p.returncode == 0, p.stderr.decode()
    ids = [int(x) for x in p.stdout.split()]
    assert ids == enc.encode_ordinary(shakespeare.decode())


def bench(tool, data, tmp_path, name):
    f = tmp_path / name
    f.write_bytes(data)
    p = run([tool, "--vocab", VOCAB_DIR, "bench", str(f)])
    assert p.returncode == 0, p.stderr.decode()
    line = p.stdout.decode().strip().split("\n")[-1]
    return {k: float(v) for k, v in re.findall(r"(\w+)=([0-9.]+)", line)}


def test_encode_speed(gpt2_tok, shakespeare, tmp_path):
    r = bench(gpt2_tok, shakespeare, tmp_path, "shakespeare.txt")
    report(f"encode speed: tinyshakespeare {r['bytes'] / 1e6:.2f} MB -> {int(r['tokens'])} "
           f"tokens in {r['cold_s']:.3f} s cold ({r['cold_MB_s']:.1f} MB/s), "
           f"{r['warm_s']:.3f} s with the piece cache warm ({r['warm_MB_s']:.1f} MB/s)")
    assert r["cold_s"] < 1.0


@pytest.mark.parametrize("kind", ["spaces", "newlines", "one_word", "random_bytes", "cjk"])
def test_pathological_inputs(gpt2_tok, enc, tmp_path, kind):
    """1 MB inputs that make one huge piece or many odd ones: the heap-ordered BPE must stay
    far from quadratic. A 20 KB prefix of each is also checked against tiktoken."""
    rng = random.Random(SEED + 2)
    n = 1 << 20
    data = {
        "spaces": b" " * n,
        "newlines": b"\n \t" * (n // 3),
        "one_word": bytes(rng.choice(b"abcdefghij") for _ in range(n)),
        "random_bytes": bytes(rng.randrange(256) for _ in range(n)),
        "cjk": ("".join(rng.choice(SCRIPTS["cjk"]) for _ in range(n // 3))).encode(),
    }[kind]
    r = bench(gpt2_tok, data, tmp_path, kind)
    report(f"encode speed: 1 MiB of {kind}: {r['cold_s']:.3f} s ({r['cold_MB_s']:.1f} MB/s)")
    assert r["cold_s"] < 5.0
    small = data[:20000]
    got = c_encode_batch(gpt2_tok, [small])[0]
    assert got == expected_bytes(enc, small)


# ---- another vocabulary: EOT elsewhere, or none -----------------------------------------

def small_vocab(tmp_path, n_merges, eot=True):
    """GPT-2's first 256 byte tokens and first |n_merges| merges (ids 256..), as tiktoken
    expects, with "<|endoftext|>" at id 256 + n_merges (or absent)."""
    with open(os.path.join(VOCAB_DIR, "encoder.json"), encoding="utf-8") as f:
        full = json.load(f)
    with open(os.path.join(VOCAB_DIR, "vocab.bpe"), encoding="utf-8") as f:
        lines = f.read().split("\n")
    top = 256 + n_merges
    encoder = {k: v for k, v in full.items() if v < top}
    if eot:
        encoder[EOT] = top
    d = tmp_path / f"vocab{n_merges}{'e' if eot else 'n'}"
    d.mkdir()
    (d / "encoder.json").write_text(json.dumps(encoder, ensure_ascii=False), encoding="utf-8")
    (d / "vocab.bpe").write_text("\n".join(lines[:1 + n_merges]) + "\n", encoding="utf-8")
    return str(d)


@pytest.mark.parametrize("eot", [True, False])
def test_other_vocab(gpt2_tok, shakespeare, tmp_path, eot):
    d = small_vocab(tmp_path, 1000, eot)
    ref = tiktoken_encoding(d, 1256 if eot else None, name="small")
    strings = make_strings(shakespeare)[::3]
    items = [s.encode() for _, s in strings]
    ordinary = c_encode_batch(gpt2_tok, items, vocab=d)
    special = c_encode_batch(gpt2_tok, items, special=True, vocab=d)
    bad = 0
    for (_, s), a, b in zip(strings, ordinary, special):
        want_special = ref.encode(s, allowed_special="all") if eot else ref.encode_ordinary(s)
        bad += a != ref.encode_ordinary(s) or b != want_special
    report(f"1,000-merge vocabulary ({'EOT 1256' if eot else 'no EOT'}): {len(strings)} "
           f"strings x 2 modes, {bad} mismatches")
    assert bad == 0
    if eot:
        assert c_encode_batch(gpt2_tok, [b"a<|endoftext|>"], special=True, vocab=d) == \
            [[64, 1256]]


def test_sanitized_build_agrees(gpt2_tok, gpt2_tok_asan, shakespeare):
    """All the strings above through the ASan+UBSan build: same ids, same bytes back, and
    not a word from the sanitizers."""
    strings = make_strings(shakespeare)
    items = [s.encode() for _, s in strings] + make_byte_strings(strings)
    for special in (False, True):
        cmd = ["--vocab", VOCAB_DIR] + (["--special"] if special else []) + ["encode-batch"]
        p = run([gpt2_tok_asan] + cmd, records(items))
        no_sanitizer_report(p)
        assert p.returncode == 0
        assert p.stdout == run([gpt2_tok] + cmd, records(items)).stdout
        ids = [[int(x) for x in l.split()] for l in p.stdout.decode().split("\n")[:-1]]
        data = "".join(" ".join(map(str, i)) + "\n" for i in ids).encode()
        q = run([gpt2_tok_asan, "--vocab", VOCAB_DIR, "decode-batch"], data)
        no_sanitizer_report(q)
        assert q.returncode == 0
