"""Writes broken GPT-2 checkpoints and vocabularies, each with what its error must name.

For the loaders' hostile-input tests (the C program under ASan must give a clear error,
no crash, nothing read past the end). Every case starts from a valid small file written
here (llm.c, safetensors + config.json, encoder.json + vocab.bpe) and breaks one thing.
Output (default build/gpt2-bad/, never committed):

    OUT/manifest.json   [{"name", "kind": "llmc" | "hf" | "vocab", "path" (relative to OUT),
                          "mentions": [words the error message should contain, any one],
                          "what": one line on the damage}, ...]
    OUT/<name>.bin      llm.c cases;  OUT/<name>/ model.safetensors + config.json;
    OUT/<name>/         encoder.json + vocab.bpe for vocab cases

The valid originals are there too (names starting with "ok_", mentions empty) so a test
can check they load. The small model: L=2, C=64, NH=4, V=500 (Vp 512), maxT=32.

    python tests/gen/gen_gpt2_bad_files.py [--out DIR]
"""

import argparse
import json
import pathlib
import shutil
import struct
import sys

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "reference"))
sys.path.insert(0, str(REPO / "tests" / "gen"))
import gen_gpt2_checkpoints as gen  # noqa: E402
import gpt2_io  # noqa: E402

CFG = gen.make_config(L=2, C=64, NH=4, V=500, maxT=32)


class Cases:
    def __init__(self, out):
        self.out = pathlib.Path(out)
        self.list = []

    def add(self, name, kind, what, mentions):
        path = f"{name}.bin" if kind == "llmc" else name
        self.list.append({"name": name, "kind": kind, "path": path, "what": what,
                          "mentions": list(mentions)})
        return self.out / path


# ---------------------------------------------------------------------------------------
# llm.c

def llmc_cases(c, good):
    raw = good.read_bytes()
    header = np.frombuffer(raw[:1024], "<i4").copy()

    def with_fields(name, what, mentions, **fields):
        h = header.copy()
        for k, v in fields.items():
            h[int(k[1:])] = v
        c.add(name, "llmc", what, mentions).write_bytes(h.tobytes() + raw[1024:])

    def cut(name, what, mentions, data):
        c.add(name, "llmc", what, mentions).write_bytes(data)

    cut("llmc_empty", "0 bytes", ["header", "bytes", "short", "truncated"], b"")
    cut("llmc_short_header", "100 bytes: inside the header", ["header", "short", "truncated"],
        raw[:100])
    cut("llmc_header_only", "the 1024-byte header and nothing else", ["size", "bytes",
        "truncated", "short"], raw[:1024])
    cut("llmc_truncated", "half the tensors", ["size", "bytes", "truncated", "short"],
        raw[:len(raw) // 2])
    cut("llmc_truncated_1", "one byte short", ["size", "bytes", "truncated", "short"],
        raw[:-1])
    cut("llmc_trailing", "4 bytes after the last tensor", ["size", "bytes", "trailing"],
        raw + b"\0\0\0\0")
    with_fields("llmc_magic", "magic 20240327 (llm.c's debug-state magic)", ["magic"],
                h0=20240327)
    with_fields("llmc_magic_swapped", "magic byte-swapped (a big-endian writer)", ["magic"],
                h0=int.from_bytes(struct.pack("<i", 20240326), "big", signed=True))
    with_fields("llmc_version_2", "version 2 (old unpadded f32 format)", ["version"], h1=2)
    with_fields("llmc_version_4", "version 4 (unknown)", ["version"], h1=4)
    with_fields("llmc_bf16_f32_body", "version 5 (bf16) over an f32 body: twice the size",
                ["size", "bytes"], h1=5)
    with_fields("llmc_layers_0", "num_layers 0", ["layers", "num_layers", "L"], h4=0)
    with_fields("llmc_layers_neg", "num_layers -2", ["layers", "num_layers", "L"], h4=-2)
    with_fields("llmc_vocab_neg", "vocab_size -1", ["vocab", "V"], h3=-1)
    with_fields("llmc_maxt_0", "max_seq_len 0", ["max_seq_len", "maxT", "context"], h2=0)
    with_fields("llmc_heads_0", "num_heads 0", ["heads", "NH"], h5=0)
    with_fields("llmc_heads_indivisible", "channels 64 with 5 heads", ["heads", "channels"],
                h5=5)
    with_fields("llmc_padded_small", "padded vocab 256 < vocab 500", ["padded", "Vp"], h7=256)
    with_fields("llmc_padded_0", "padded vocab 0 (a version-2 style header)", ["padded", "Vp"],
                h7=0)
    with_fields("llmc_overflow", "L = C = 2^31-1: parameter count overflows 64 bits",
                ["size", "overflow", "too large", "bytes"], h4=2**31 - 1, h6=2**31 - 1,
                h5=1)
    with_fields("llmc_channels_mismatch", "channels 128 (file holds 64)", ["size", "bytes"],
                h6=128)


# ---------------------------------------------------------------------------------------
# safetensors

def st_parts(path):
    """(header dict, data bytes) of a safetensors file."""
    b = pathlib.Path(path).read_bytes()
    n = struct.unpack("<Q", b[:8])[0]
    return json.loads(b[8:8 + n]), b[8 + n:]


def st_bytes(header, data, header_text=None):
    text = header_text if header_text is not None else json.dumps(header, separators=(",", ":"))
    hb = text.encode()
    hb += b" " * (-len(hb) % 8)
    return struct.pack("<Q", len(hb)) + hb + data


def hf_cases(c, good):
    hdr, data = st_parts(good / "model.safetensors")
    cfg_text = (good / "config.json").read_text()
    names = sorted(k for k in hdr if k != "__metadata__")

    def case(name, what, mentions, st=None, config=None, drop_config=False):
        d = c.add(name, "hf", what, mentions)
        d.mkdir(parents=True, exist_ok=True)
        (d / "model.safetensors").write_bytes(st if st is not None else
                                              (good / "model.safetensors").read_bytes())
        if not drop_config:
            (d / "config.json").write_text(config if config is not None else cfg_text)

    def edit(fn):
        h = json.loads(json.dumps(hdr))
        fn(h)
        return st_bytes(h, data)

    whole = (good / "model.safetensors").read_bytes()
    case("st_empty", "0-byte model.safetensors", ["header", "short", "truncated", "bytes"],
         st=b"")
    case("st_short", "5 bytes: not even the header length", ["header", "short", "truncated"],
         st=whole[:5])
    case("st_header_len_huge", "header length 2^60", ["header", "length", "size"],
         st=struct.pack("<Q", 2**60) + whole[8:])
    case("st_header_len_past_end", "header length one past the end of the file",
         ["header", "length", "size"], st=struct.pack("<Q", len(whole) - 7) + whole[8:])
    case("st_header_not_json", "header bytes are not JSON", ["header", "JSON", "json"],
         st=st_bytes(None, data, header_text="{not json at all"))
    case("st_header_not_object", "header is a JSON array", ["header", "object"],
         st=st_bytes(None, data, header_text="[1, 2, 3]"))
    case("st_truncated_data", "the last 100 data bytes cut", ["offset", "data", "size",
         "truncated", "bytes"], st=whole[:-100])

    big = names[-1]
    wte = "transformer.wte.weight"
    case("st_offsets_past_end", f"{big}: data_offsets end past the data",
         ["offset", big], st=edit(lambda h: h[big].update(
             data_offsets=[h[big]["data_offsets"][0], len(data) + 64])))
    case("st_offsets_reversed", f"{big}: begin > end", ["offset", big],
         st=edit(lambda h: h[big].update(data_offsets=h[big]["data_offsets"][::-1])))
    a, b = names[0], names[1]

    def overlap(h):
        # b keeps its size but starts inside a: the two tensors share bytes.
        ab, ae = h[a]["data_offsets"]
        bb, be = h[b]["data_offsets"]
        start = ab + 4 if ae - ab > 4 else ab
        h[b]["data_offsets"] = [start, start + (be - bb)]
        h[b]["shape"] = h[b]["shape"]

    case("st_overlap", f"{b} overlaps {a}", ["overlap", a, b], st=edit(overlap))
    case("st_nbytes_mismatch", f"{big}: shape says fewer bytes than data_offsets span",
         ["shape", "size", "offset", big],
         st=edit(lambda h: h[big].update(shape=[1] + h[big]["shape"][1:])))
    case("st_dtype_unknown", f"{big}: dtype 'Q4'", ["dtype", big],
         st=edit(lambda h: h[big].update(dtype="Q4")))
    case("st_shape_negative", f"{big}: shape [-1, ...]", ["shape", big],
         st=edit(lambda h: h[big].update(shape=[-1] + h[big]["shape"][1:])))
    dup = names[2]
    text = json.dumps(hdr, separators=(",", ":"))
    dup_entry = json.dumps({dup: hdr[dup]}, separators=(",", ":"))[1:-1]
    case("st_duplicate_name", f"{dup} appears twice in the header", ["duplicate", dup],
         st=st_bytes(None, data, header_text=text[:-1] + "," + dup_entry + "}"))

    from safetensors.numpy import load_file, save

    tensors = load_file(str(good / "model.safetensors"))
    missing = "transformer.h.1.mlp.c_fc.bias"
    case("st_missing_tensor", f"{missing} absent (the file is otherwise valid)",
         ["h.1.mlp.c_fc.bias", "missing"],
         st=save({k: v for k, v in tensors.items() if k != missing}))
    case("st_extra_tensor", "an extra tensor transformer.h.0.attn.c_attn.lora_A",
         ["lora_A", "unknown", "unexpected"],
         st=save(dict(tensors, **{"transformer.h.0.attn.c_attn.lora_A":
                                  np.zeros((4, 64), np.float32)})))
    case("st_wrong_dtype_size", f"{wte} stored as I32 (a GPT-2 has float weights)",
         ["dtype", "wte"], st=save(dict(tensors, **{wte: tensors[wte].view(np.int32)})))
    T = CFG.max_seq_len
    buffers = {f"h.{l}.attn.bias": np.tril(np.ones((1, 1, T, T), np.float32))
               for l in range(CFG.num_layers)}
    buffers["lm_head.weight"] = tensors[wte]
    d = c.add("ok_hf_buffers", "hf", "valid: no prefix, plus the causal-mask buffers "
              "h.{l}.attn.bias and lm_head.weight (as older GPT2LMHeadModel files carry)", [])
    d.mkdir(parents=True, exist_ok=True)
    (d / "model.safetensors").write_bytes(save(dict(
        {k[len("transformer."):]: v for k, v in tensors.items()}, **buffers),
        metadata={"format": "pt"}))
    (d / "config.json").write_text(cfg_text)
    case("st_wrong_shape", f"{wte} declared (V, C+... ) transposed: (C, V)", ["wte", "shape"],
         st=edit(lambda h: h[wte].update(shape=h[wte]["shape"][::-1])))
    case("st_config_missing", "no config.json beside model.safetensors", ["config.json"],
         drop_config=True)
    case("st_config_not_json", "config.json is not JSON", ["config.json", "JSON", "json"],
         config="{\"n_layer\": 2,")
    hc = json.loads(cfg_text)
    case("st_config_no_layers", "config.json without n_layer", ["n_layer"],
         config=json.dumps({k: v for k, v in hc.items() if k != "n_layer"}))
    case("st_config_more_layers", "config.json says 3 layers, file holds 2",
         ["h.2.", "missing", "n_layer"], config=json.dumps(dict(hc, n_layer=3)))
    case("st_config_channels", "config.json says n_embd 32, tensors are 64 wide",
         ["shape", "n_embd"], config=json.dumps(dict(hc, n_embd=32, n_head=4)))
    case("st_config_heads", "config.json: n_embd 64 with 5 heads", ["n_head", "heads"],
         config=json.dumps(dict(hc, n_head=5)))


# ---------------------------------------------------------------------------------------
# vocabularies (GPT-2 encoder.json + vocab.bpe)

def tiny_vocab(folder):
    """A valid GPT-2-format vocabulary: 256 bytes, 8 merges, <|endoftext|> = 264."""
    sys.path.insert(0, str(REPO / "examples" / "gpt2" / "train"))
    import bpe

    merges = [("h", "e"), ("Ġ", "t"), ("Ġt", "he"), ("t", "h"), ("a", "n"), ("Ġ", "a"),
              ("an", "d"), ("Ġa", "n")]
    bpe.write(folder, merges)
    return merges


def vocab_cases(c, good):
    enc_text = (good / "encoder.json").read_text(encoding="utf-8")
    bpe_text = (good / "vocab.bpe").read_text(encoding="utf-8")
    enc = json.loads(enc_text)
    lines = bpe_text.split("\n")   # [header, merge 0..7, ""]

    def case(name, what, mentions, encoder=None, vocab=None, drop=None):
        d = c.add(name, "vocab", what, mentions)
        d.mkdir(parents=True, exist_ok=True)
        files = {"encoder.json": encoder if encoder is not None else enc_text,
                 "vocab.bpe": vocab if vocab is not None else bpe_text}
        for fname, content in files.items():
            if fname == drop:
                continue
            data = content if isinstance(content, bytes) else content.encode("utf-8")
            (d / fname).write_bytes(data)

    case("vocab_missing_merge", "vocab.bpe lacks merge 2 (Ġt he); encoder.json has 'Ġthe'",
         ["merge", "Ġthe", "vocab.bpe"], vocab="\n".join(lines[:3] + lines[4:]))
    case("vocab_merge_not_in_encoder", "merge 'an d' makes 'and', absent from encoder.json",
         ["and", "encoder.json", "merge"],
         encoder=json.dumps({k: v for k, v in enc.items() if k != "and"}, ensure_ascii=False))
    case("vocab_merge_unknown_part", "a merge of a token no earlier line made ('zq' 'x')",
         ["merge", "zq"], vocab="\n".join(lines[:-1] + ["zq x", ""]))
    case("vocab_merge_one_token", "a merge line with one token", ["merge", "line"],
         vocab="\n".join(lines[:3] + ["lonely"] + lines[3:]))
    case("vocab_encoder_not_json", "encoder.json is not JSON", ["encoder.json", "JSON", "json"],
         encoder="{\"!\": 0, ")
    case("vocab_encoder_array", "encoder.json is a JSON array", ["encoder.json", "object"],
         encoder="[\"!\", \"\\\"\"]")
    case("vocab_encoder_bad_id", "an id of -5", ["encoder.json", "id"],
         encoder=json.dumps(dict(enc, **{"!": -5}), ensure_ascii=False))
    case("vocab_encoder_dup_id", "two tokens with id 7", ["encoder.json", "id", "duplicate"],
         encoder=json.dumps(dict(enc, **{"\"": 7}), ensure_ascii=False))
    case("vocab_no_eot", "no <|endoftext|>", ["<|endoftext|>", "endoftext"],
         encoder=json.dumps({k: v for k, v in enc.items() if k != "<|endoftext|>"},
                            ensure_ascii=False))
    case("vocab_missing_byte", "single-byte token 'Ā' (byte 0) absent", ["byte", "Ā"],
         encoder=json.dumps({k: v for k, v in enc.items() if k != "Ā"}, ensure_ascii=False))
    case("vocab_bpe_missing", "no vocab.bpe", ["vocab.bpe"], drop="vocab.bpe")
    case("vocab_encoder_missing", "no encoder.json", ["encoder.json"], drop="encoder.json")
    case("vocab_bpe_bad_utf8", "vocab.bpe holds invalid UTF-8", ["vocab.bpe", "UTF-8", "utf-8"],
         vocab=bpe_text.encode("utf-8") + b"\xff\xfe x\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(REPO / "build" / "gpt2-bad"))
    a = ap.parse_args(argv)
    out = pathlib.Path(a.out)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    c = Cases(out)
    good_bin = c.add("ok_llmc", "llmc", "valid llm.c f32 checkpoint", [])
    good_bf16 = c.add("ok_llmc_bf16", "llmc", "valid llm.c bf16 checkpoint", [])
    good_hf = c.add("ok_hf", "hf", "valid safetensors + config.json", [])
    good_vocab = c.add("ok_vocab", "vocab", "valid 265-id vocabulary", [])
    w = gpt2_io.random_weights(CFG, 3)
    gpt2_io.write_llmc(good_bin, CFG, w, "f32")
    gpt2_io.write_llmc(good_bf16, CFG, w, "bf16")
    gpt2_io.write_hf(good_hf, CFG, w, prefix=True)
    tiny_vocab(good_vocab)
    llmc_cases(c, good_bin)
    hf_cases(c, good_hf)
    vocab_cases(c, good_vocab)
    with open(out / "manifest.json", "w", encoding="utf-8") as f:
        json.dump(c.list, f, indent=1, ensure_ascii=False)
    print(f"wrote {len(c.list)} cases ({sum(not e['mentions'] for e in c.list)} valid) "
          f"under {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
