"""Random GPT-2 checkpoints for the loader tests (and for anyone who needs one of any shape).

llm.c files are written here from llm.c's documented layout (a 256-int32 header, then the 16
parameter tensors in order, weights (out, in)); Hugging Face files are written by the
`safetensors` library itself (safetensors.numpy.save_file) with GPT2LMHeadModel's names and
Conv1D (in, out) weights, plus the config.json that transformers writes for GPT-2. Both
come from one set of parameters, so a loader reading both must see the same model.

    python tests/gpt2/gen_checkpoints.py OUT_DIR [--L 2 --NH 4 --C 64 --V 300 --Vp 320
                                                  --maxT 32 --seed 1 --dtype f32|bf16
                                                  --init normal|gpt2]
writes OUT_DIR/model.bin, OUT_DIR/model.safetensors and OUT_DIR/config.json. The 124M
shape is --L 12 --NH 12 --C 768 --V 50257 --Vp 50304 --maxT 1024 (about 500 MB each in f32).
"""
import argparse
import json
import os

import ml_dtypes
import numpy as np
import safetensors.numpy

LLMC_MAGIC = 20240326
LLMC_ORDER = ["wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
              "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"]
PER_LAYER = LLMC_ORDER[2:14]
# llm.c kind -> (HF suffix, transposed in HF)
HF_LAYER = {
    "ln1w": ("ln_1.weight", False), "ln1b": ("ln_1.bias", False),
    "qkvw": ("attn.c_attn.weight", True), "qkvb": ("attn.c_attn.bias", False),
    "attprojw": ("attn.c_proj.weight", True), "attprojb": ("attn.c_proj.bias", False),
    "ln2w": ("ln_2.weight", False), "ln2b": ("ln_2.bias", False),
    "fcw": ("mlp.c_fc.weight", True), "fcb": ("mlp.c_fc.bias", False),
    "fcprojw": ("mlp.c_proj.weight", True), "fcprojb": ("mlp.c_proj.bias", False),
}


def config(L=2, NH=4, C=64, V=300, Vp=320, maxT=32):
    return dict(L=L, NH=NH, C=C, V=V, Vp=Vp, maxT=maxT)


def llmc_shapes(cfg):
    L, C = cfg["L"], cfg["C"]
    return {
        "wte": (cfg["Vp"], C), "wpe": (cfg["maxT"], C),
        "ln1w": (L, C), "ln1b": (L, C), "qkvw": (L, 3 * C, C), "qkvb": (L, 3 * C),
        "attprojw": (L, C, C), "attprojb": (L, C), "ln2w": (L, C), "ln2b": (L, C),
        "fcw": (L, 4 * C, C), "fcb": (L, 4 * C), "fcprojw": (L, C, 4 * C), "fcprojb": (L, C),
        "lnfw": (C,), "lnfb": (C,),
    }


def random_params(cfg, seed=1, dtype="f32"):
    """llm.c-layout parameters; bf16 ones are bf16-representable (rounded once here)."""
    rng = np.random.default_rng(seed)
    p = {}
    for name, shape in llmc_shapes(cfg).items():
        a = rng.standard_normal(shape, dtype=np.float32)
        if dtype == "bf16":
            a = a.astype(ml_dtypes.bfloat16)
        p[name] = a
    p["wte"][cfg["V"]:] = 0  # llm.c pads the vocab rows with zeros
    return p


def gpt2_params(cfg, seed=1, dtype="f32"):
    """Like random_params, at GPT-2's initialisation scales (N(0, 0.02) matrices and
    embeddings, the residual projections scaled by 1/sqrt(2 L)), with nonzero biases and
    layer-norm parameters near (1, 0): activations stay O(1) through any depth, as in a
    trained model, so f32 results can be compared at tight tolerances."""
    rng = np.random.default_rng(seed)
    L = cfg["L"]
    scale = {"wte": 0.02, "wpe": 0.02, "qkvw": 0.02, "fcw": 0.02,
             "attprojw": 0.02 / np.sqrt(2 * L), "fcprojw": 0.02 / np.sqrt(2 * L)}
    p = {}
    for name, shape in llmc_shapes(cfg).items():
        a = rng.standard_normal(shape, dtype=np.float32)
        if name in scale:
            a *= np.float32(scale[name])
        elif name in ("ln1w", "ln2w", "lnfw"):
            a = np.float32(1) + np.float32(0.1) * a
        else:  # biases
            a *= np.float32(0.02)
        if dtype == "bf16":
            a = a.astype(ml_dtypes.bfloat16)
        p[name] = a
    p["wte"][cfg["V"]:] = 0
    return p


def llmc_bytes(cfg, p, dtype="f32", version=None):
    header = np.zeros(256, np.int32)
    header[:8] = [LLMC_MAGIC, version or (3 if dtype == "f32" else 5), cfg["maxT"], cfg["V"],
                  cfg["L"], cfg["NH"], cfg["C"], cfg["Vp"]]
    parts = [header.tobytes()]
    for name in LLMC_ORDER:
        parts.append(np.ascontiguousarray(p[name]).tobytes())
    return b"".join(parts)


def hf_tensors(cfg, p, prefix="transformer."):
    """GPT2LMHeadModel's state dict (Conv1D weights (in, out)), from llm.c parameters."""
    t = {prefix + "wte.weight": p["wte"][:cfg["V"]], prefix + "wpe.weight": p["wpe"]}
    for l in range(cfg["L"]):
        for kind in PER_LAYER:
            suffix, tr = HF_LAYER[kind]
            a = p[kind][l]
            t[f"{prefix}h.{l}.{suffix}"] = a.T if tr else a
    t[prefix + "ln_f.weight"] = p["lnfw"]
    t[prefix + "ln_f.bias"] = p["lnfb"]
    return {k: np.ascontiguousarray(v) for k, v in t.items()}


def hf_config(cfg):
    return {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
            "n_layer": cfg["L"], "n_head": cfg["NH"], "n_embd": cfg["C"],
            "vocab_size": cfg["V"], "n_positions": cfg["maxT"], "n_ctx": cfg["maxT"],
            "layer_norm_epsilon": 1e-5, "activation_function": "gelu_new"}


def write_safetensors(path, tensors, metadata=None):
    safetensors.numpy.save_file(tensors, path, metadata=metadata or {"format": "pt"})


def write_config(path, cfg, **override):
    c = hf_config(cfg)
    c.update(override)
    with open(path, "w") as f:
        json.dump(c, f, indent=2)


def st_bytes(entries, data, pad_to=8, extra=b""):
    """A safetensors file by hand (for files the library would refuse to write):
    |entries| is the header dict as-is, |data| the data bytes."""
    h = json.dumps(entries, separators=(",", ":")).encode() + extra
    if pad_to:
        h += b" " * (-(8 + len(h)) % pad_to)
    return len(h).to_bytes(8, "little") + h + data


def st_entries(tensors):
    """Header entries and data bytes for |tensors| (name -> array), packed in order."""
    entries, parts, at = {}, [], 0
    for name, a in tensors.items():
        dt = {np.dtype(np.float32): "F32", np.dtype(ml_dtypes.bfloat16): "BF16",
              np.dtype(np.float16): "F16"}[a.dtype]
        b = a.tobytes()
        entries[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [at, at + len(b)]}
        parts.append(b)
        at += len(b)
    return entries, b"".join(parts)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    for k, v in config().items():
        ap.add_argument("--" + k, type=int, default=v)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    ap.add_argument("--init", choices=["normal", "gpt2"], default="normal",
                    help="normal: N(0, 1) everywhere; gpt2: GPT-2's init scales")
    a = ap.parse_args()
    cfg = config(a.L, a.NH, a.C, a.V, a.Vp, a.maxT)
    p = (gpt2_params if a.init == "gpt2" else random_params)(cfg, a.seed, a.dtype)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "model.bin"), "wb") as f:
        f.write(llmc_bytes(cfg, p, a.dtype))
    write_safetensors(os.path.join(a.out, "model.safetensors"), hf_tensors(cfg, p))
    write_config(os.path.join(a.out, "config.json"), cfg)
    print(f"wrote {a.out}/model.bin, model.safetensors, config.json ({cfg}, {a.dtype})")


if __name__ == "__main__":
    main()
