"""An llm.c GPT-2 checkpoint (version 3, f32) as a GGUF file for llama.cpp, so that ggml can
be timed on the same weights and the same machine as hlojit (bench/ggml/side_by_side.sh).

    python bench/ggml/llmc_to_gguf.py MODEL.bin VOCAB_DIR OUT.gguf

VOCAB_DIR holds GPT-2's encoder.json and vocab.bpe (examples/gpt2/data/gpt2-bpe). The GGUF
is written by llama.cpp's own gguf-py (gguf.GGUFWriter, on PYTHONPATH), with the tensor and
key names of llama.cpp's "gpt2" architecture: weights stay (out, in) as llm.c stores them
(what llama.cpp's HF converter makes of Conv1D's (in, out)), wte loses its padded rows, and
there is no output.weight (llama.cpp ties the head to token_embd). All tensors f32.
"""
import json
import sys

import numpy as np

import gguf

LLMC_MAGIC = 20240326
ORDER = ["wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
         "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"]
# llm.c kind -> llama.cpp gpt2 tensor name (per layer)
GGUF_LAYER = {"ln1w": "attn_norm.weight", "ln1b": "attn_norm.bias",
              "qkvw": "attn_qkv.weight", "qkvb": "attn_qkv.bias",
              "attprojw": "attn_output.weight", "attprojb": "attn_output.bias",
              "ln2w": "ffn_norm.weight", "ln2b": "ffn_norm.bias",
              "fcw": "ffn_up.weight", "fcb": "ffn_up.bias",
              "fcprojw": "ffn_down.weight", "fcprojb": "ffn_down.bias"}


def read_llmc(path):
    raw = np.fromfile(path, dtype=np.uint8)
    hdr = raw[:1024].view(np.int32)
    if hdr[0] != LLMC_MAGIC or hdr[1] != 3:
        sys.exit(f"{path}: not an llm.c f32 checkpoint (magic {hdr[0]}, version {hdr[1]})")
    maxT, V, L, NH, C, Vp = (int(v) for v in hdr[2:8])
    shapes = {"wte": (Vp, C), "wpe": (maxT, C), "ln1w": (L, C), "ln1b": (L, C),
              "qkvw": (L, 3 * C, C), "qkvb": (L, 3 * C), "attprojw": (L, C, C),
              "attprojb": (L, C), "ln2w": (L, C), "ln2b": (L, C), "fcw": (L, 4 * C, C),
              "fcb": (L, 4 * C), "fcprojw": (L, C, 4 * C), "fcprojb": (L, C),
              "lnfw": (C,), "lnfb": (C,)}
    data = raw[1024:].view(np.float32)
    out, off = {}, 0
    for k in ORDER:
        n = int(np.prod(shapes[k]))
        if off + n > data.size:
            sys.exit(f"{path}: truncated at {k}")
        out[k] = data[off:off + n].reshape(shapes[k])
        off += n
    return dict(maxT=maxT, V=V, L=L, NH=NH, C=C, Vp=Vp), out


def main(argv):
    if len(argv) != 4:
        sys.exit(__doc__)
    cfg, p = read_llmc(argv[1])
    enc = json.load(open(f"{argv[2]}/encoder.json", encoding="utf-8"))
    merges = [ln for ln in open(f"{argv[2]}/vocab.bpe", encoding="utf-8").read().split("\n")
              if ln and not ln.startswith("#version")]
    tokens = [t for t, _ in sorted(enc.items(), key=lambda kv: kv[1])]
    if len(tokens) != cfg["V"]:
        sys.exit(f"vocab has {len(tokens)} tokens, the checkpoint V = {cfg['V']}")
    eot = enc["<|endoftext|>"]
    types = [gguf.TokenType.CONTROL if i == eot else gguf.TokenType.NORMAL
             for i in range(len(tokens))]

    w = gguf.GGUFWriter(argv[3], "gpt2")
    w.add_name("gpt2-llmc")
    w.add_context_length(cfg["maxT"])
    w.add_embedding_length(cfg["C"])
    w.add_feed_forward_length(4 * cfg["C"])
    w.add_block_count(cfg["L"])
    w.add_head_count(cfg["NH"])
    w.add_layer_norm_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(eot)
    w.add_eos_token_id(eot)
    w.add_tensor("token_embd.weight", np.ascontiguousarray(p["wte"][:cfg["V"]]))
    w.add_tensor("position_embd.weight", p["wpe"])
    for l in range(cfg["L"]):
        for k, name in GGUF_LAYER.items():
            w.add_tensor(f"blk.{l}.{name}", np.ascontiguousarray(p[k][l]))
    w.add_tensor("output_norm.weight", p["lnfw"])
    w.add_tensor("output_norm.bias", p["lnfb"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {argv[3]}: L={cfg['L']} C={cfg['C']} NH={cfg['NH']} V={cfg['V']} "
          f"maxT={cfg['maxT']}, f32")


if __name__ == "__main__":
    main(sys.argv)
