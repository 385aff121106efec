"""GPT-2 checkpoints for the NumPy reference: read and write llm.c and Hugging Face files.

One in-memory form for both formats: a `Config` and a dict of NumPy arrays under llm.c's
names and layouts (nn.Linear weights are (out, in)):

    // V vocab, Vp padded vocab, maxT context, L layers, NH heads, C channels
    wte (Vp, C)  wpe (maxT, C)
    ln1w ln1b (L, C)  qkvw (L, 3C, C)  qkvb (L, 3C)  attprojw (L, C, C)  attprojb (L, C)
    ln2w ln2b (L, C)  fcw (L, 4C, C)   fcb (L, 4C)   fcprojw (L, C, 4C)  fcprojb (L, C)
    lnfw lnfb (C,)

llm.c checkpoint (karpathy/llm.c train_gpt2.py `write_model`, train_gpt2.c
`gpt2_build_from_checkpoint`): 256 little-endian int32 — [0] magic 20240326, [1] version
(3: every tensor f32, 5: every tensor bf16, layer norms included), [2] maxT, [3] V, [4] L,
[5] NH, [6] C, [7] Vp (V rounded up to a multiple of 128; rows V..Vp-1 of wte are zero),
the rest 0 — then the 16 tensors above, in that order, each contiguous, nothing after them.

Hugging Face GPT2LMHeadModel (`model.safetensors` + `config.json` in the same folder):
tensors `[transformer.]wte.weight` (V, C), `wpe.weight`, `h.{l}.ln_1.weight`, ...,
`h.{l}.attn.c_attn.weight` — Conv1D, so (in, out), the transpose of llm.c's. Buffers a
checkpoint may carry (`h.{l}.attn.bias`, the causal mask; `attn.masked_bias`) are ignored,
and so is `lm_head.weight` (tied to wte: the config must say tie_word_embeddings). F32, F16
and BF16 tensors load (to f32). Only the GPT-2 architecture itself is accepted: tanh GELU
(gelu_new), n_inner 4C or null, scaled attention, no scaling by layer index.

Invariants: readers check every header field and size against the file before reading and
raise CheckpointError naming the file and the field; writers are deterministic (same
weights -> same bytes). Random weights are drawn from NumPy's PCG64 from one seed, so a
generator run is reproducible bit for bit.
"""

import dataclasses
import json
import pathlib

import ml_dtypes
import numpy as np

LLMC_MAGIC = 20240326
LLMC_VERSION_F32 = 3
LLMC_VERSION_BF16 = 5
LLMC_HEADER_INTS = 256
LLMC_VOCAB_MULTIPLE = 128  # llm.c's pad_vocab(multiple=128)

# Tensor order in an llm.c file, with each shape as a function of the config.
PARAM_NAMES = ("wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
               "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb")


class CheckpointError(ValueError):
    """A checkpoint that is wrong, truncated or inconsistent; the message names file and field."""


@dataclasses.dataclass(frozen=True)
class Config:
    max_seq_len: int        # maxT
    vocab_size: int         # V: the real vocabulary; logits are over these ids only
    padded_vocab_size: int  # Vp >= V: rows of wte
    num_layers: int         # L
    num_heads: int          # NH
    channels: int           # C

    @property
    def head_size(self):
        return self.channels // self.num_heads


def padded_vocab(V, multiple=LLMC_VOCAB_MULTIPLE):
    return (V + multiple - 1) // multiple * multiple


def param_shapes(cfg):
    """Name -> shape of every parameter, in llm.c file order."""
    V, T, L, C = cfg.padded_vocab_size, cfg.max_seq_len, cfg.num_layers, cfg.channels
    return {
        "wte": (V, C), "wpe": (T, C), "ln1w": (L, C), "ln1b": (L, C),
        "qkvw": (L, 3 * C, C), "qkvb": (L, 3 * C), "attprojw": (L, C, C), "attprojb": (L, C),
        "ln2w": (L, C), "ln2b": (L, C), "fcw": (L, 4 * C, C), "fcb": (L, 4 * C),
        "fcprojw": (L, C, 4 * C), "fcprojb": (L, C), "lnfw": (C,), "lnfb": (C,),
    }


def num_params(cfg):
    return sum(int(np.prod(s)) for s in param_shapes(cfg).values())


def check_config(cfg, where):
    fields = dataclasses.asdict(cfg)
    for name, v in fields.items():
        if not isinstance(v, (int, np.integer)) or v <= 0:
            raise CheckpointError(f"{where}: {name} = {v!r}: must be a positive integer")
    if cfg.channels % cfg.num_heads:
        raise CheckpointError(f"{where}: channels {cfg.channels} is not a multiple of "
                              f"num_heads {cfg.num_heads}")
    if cfg.padded_vocab_size < cfg.vocab_size:
        raise CheckpointError(f"{where}: padded_vocab_size {cfg.padded_vocab_size} < "
                              f"vocab_size {cfg.vocab_size}")


# ---------------------------------------------------------------------------------------
# llm.c

def read_llmc(path):
    """(Config, weights as f32 arrays) from an llm.c checkpoint (version 3 or 5)."""
    path = pathlib.Path(path)
    size = path.stat().st_size
    hbytes = LLMC_HEADER_INTS * 4
    if size < hbytes:
        raise CheckpointError(f"{path}: {size} bytes, shorter than the {hbytes}-byte header")
    header = np.fromfile(path, dtype="<i4", count=LLMC_HEADER_INTS)
    if header[0] != LLMC_MAGIC:
        raise CheckpointError(f"{path}: header[0] (magic) = {header[0]}, expected {LLMC_MAGIC}")
    version = int(header[1])
    if version not in (LLMC_VERSION_F32, LLMC_VERSION_BF16):
        raise CheckpointError(f"{path}: header[1] (version) = {version}: only 3 (f32) and 5 "
                              f"(bf16) are llm.c GPT-2 checkpoints with a padded vocabulary")
    cfg = Config(max_seq_len=int(header[2]), vocab_size=int(header[3]),
                 num_layers=int(header[4]), num_heads=int(header[5]), channels=int(header[6]),
                 padded_vocab_size=int(header[7]))
    check_config(cfg, str(path))
    esize = 4 if version == LLMC_VERSION_F32 else 2
    want = hbytes + num_params(cfg) * esize
    if size != want:
        raise CheckpointError(f"{path}: {size} bytes, but the header (maxT {cfg.max_seq_len}, "
                              f"V {cfg.vocab_size}, Vp {cfg.padded_vocab_size}, L "
                              f"{cfg.num_layers}, NH {cfg.num_heads}, C {cfg.channels}, "
                              f"version {version}) needs {want}")
    raw = np.memmap(path, dtype="<f4" if esize == 4 else "<u2", mode="r", offset=hbytes)
    weights, off = {}, 0
    for name, shape in param_shapes(cfg).items():
        n = int(np.prod(shape))
        a = np.asarray(raw[off:off + n])
        if esize == 2:
            a = a.view(ml_dtypes.bfloat16)
        weights[name] = a.astype(np.float32).reshape(shape)
        off += n
    del raw
    return cfg, weights


def write_llmc(path, cfg, weights, dtype="f32"):
    """Writes an llm.c checkpoint; wte may have V or Vp rows (zero rows pad it to Vp)."""
    if dtype not in ("f32", "bf16"):
        raise ValueError(f"dtype {dtype!r}: f32 or bf16")
    check_config(cfg, "write_llmc")
    header = np.zeros(LLMC_HEADER_INTS, dtype="<i4")
    header[:8] = [LLMC_MAGIC, LLMC_VERSION_F32 if dtype == "f32" else LLMC_VERSION_BF16,
                  cfg.max_seq_len, cfg.vocab_size, cfg.num_layers, cfg.num_heads,
                  cfg.channels, cfg.padded_vocab_size]
    out_dtype = np.dtype("<f4") if dtype == "f32" else ml_dtypes.bfloat16
    shapes = param_shapes(cfg)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        for name, shape in shapes.items():
            a = np.asarray(weights[name], dtype=np.float32)
            if name == "wte" and a.shape[0] != shape[0]:
                a = pad_rows(a, shape[0])
            if a.shape != shape:
                raise ValueError(f"write_llmc: {name} has shape {a.shape}, config needs {shape}")
            f.write(np.ascontiguousarray(a.astype(out_dtype)).tobytes())


def pad_rows(a, rows):
    if a.shape[0] > rows:
        raise ValueError(f"{a.shape[0]} rows do not fit in {rows}")
    out = np.zeros((rows,) + a.shape[1:], dtype=a.dtype)
    out[:a.shape[0]] = a
    return out


# ---------------------------------------------------------------------------------------
# Hugging Face safetensors

# (our name, HF name with {l} for the layer, transposed from Conv1D (in, out)).
_HF_LAYER = (("ln1w", "h.{l}.ln_1.weight", False), ("ln1b", "h.{l}.ln_1.bias", False),
             ("qkvw", "h.{l}.attn.c_attn.weight", True), ("qkvb", "h.{l}.attn.c_attn.bias", False),
             ("attprojw", "h.{l}.attn.c_proj.weight", True),
             ("attprojb", "h.{l}.attn.c_proj.bias", False),
             ("ln2w", "h.{l}.ln_2.weight", False), ("ln2b", "h.{l}.ln_2.bias", False),
             ("fcw", "h.{l}.mlp.c_fc.weight", True), ("fcb", "h.{l}.mlp.c_fc.bias", False),
             ("fcprojw", "h.{l}.mlp.c_proj.weight", True),
             ("fcprojb", "h.{l}.mlp.c_proj.bias", False))
_HF_GLOBAL = (("wte", "wte.weight"), ("wpe", "wpe.weight"), ("lnfw", "ln_f.weight"),
              ("lnfb", "ln_f.bias"))
_ST_DTYPES = {"F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "BF16": ml_dtypes.bfloat16,
              "F64": np.dtype("<f8")}


def hf_paths(path):
    """(model.safetensors, config.json) for a folder or a .safetensors file."""
    p = pathlib.Path(path)
    st = p / "model.safetensors" if p.is_dir() else p
    return st, st.parent / "config.json"


def _hf_config(cfg_path):
    try:
        with open(cfg_path) as f:
            hc = json.load(f)
    except FileNotFoundError:
        raise CheckpointError(f"{cfg_path}: missing (a Hugging Face model needs its config.json "
                              f"beside model.safetensors)") from None
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{cfg_path}: not JSON: {e}") from None

    def get(*names):
        for n in names:
            if n in hc and hc[n] is not None:
                return hc[n]
        raise CheckpointError(f"{cfg_path}: field {names[0]!r} is missing")

    C = get("n_embd")
    checks = (("activation_function", hc.get("activation_function", "gelu_new"),
               ("gelu_new", "gelu_pytorch_tanh")),
              ("n_inner", hc.get("n_inner"), (None, 4 * C)),
              ("scale_attn_weights", hc.get("scale_attn_weights", True), (True,)),
              ("scale_attn_by_inverse_layer_idx",
               hc.get("scale_attn_by_inverse_layer_idx", False), (False,)),
              ("tie_word_embeddings", hc.get("tie_word_embeddings", True), (True,)),
              ("layer_norm_epsilon", hc.get("layer_norm_epsilon", 1e-5), (1e-5,)))
    for name, v, ok in checks:
        if v not in ok:
            raise CheckpointError(f"{cfg_path}: {name} = {v!r}: only GPT-2's own {ok[0]!r} "
                                  f"is supported")
    V = get("vocab_size")
    cfg = Config(max_seq_len=get("n_positions", "n_ctx"), vocab_size=V, padded_vocab_size=V,
                 num_layers=get("n_layer"), num_heads=get("n_head"), channels=C)
    check_config(cfg, str(cfg_path))
    return cfg


def read_hf(path):
    """(Config, weights as f32 arrays) from a GPT2LMHeadModel safetensors file or folder."""
    from safetensors import SafetensorError, deserialize

    st_path, cfg_path = hf_paths(path)
    cfg = _hf_config(cfg_path)
    try:
        with open(st_path, "rb") as f:
            entries = deserialize(f.read())
    except FileNotFoundError:
        raise CheckpointError(f"{st_path}: missing") from None
    except SafetensorError as e:
        raise CheckpointError(f"{st_path}: not a valid safetensors file: {e}") from None
    tensors = {}
    for name, t in entries:
        key = name[len("transformer."):] if name.startswith("transformer.") else name
        if key.endswith((".attn.bias", ".attn.masked_bias")) or key == "lm_head.weight":
            continue
        if t["dtype"] not in _ST_DTYPES:
            raise CheckpointError(f"{st_path}: tensor {name}: dtype {t['dtype']} unsupported")
        if key in tensors:
            raise CheckpointError(f"{st_path}: tensor {key} appears twice")
        a = np.frombuffer(t["data"], dtype=_ST_DTYPES[t["dtype"]]).reshape(t["shape"])
        tensors[key] = (name, a)
    shapes = param_shapes(cfg)

    def take(key, want):
        if key not in tensors:
            raise CheckpointError(f"{st_path}: tensor {key!r} (with or without 'transformer.') "
                                  f"is missing")
        name, a = tensors.pop(key)
        if tuple(a.shape) != tuple(want):
            raise CheckpointError(f"{st_path}: tensor {name}: shape {tuple(a.shape)}, "
                                  f"{cfg_path.name} implies {tuple(want)}")
        return a.astype(np.float32)

    weights = {}
    for ours, hf in _HF_GLOBAL:
        weights[ours] = take(hf, shapes[ours])
    for ours, hf, transposed in _HF_LAYER:
        per = shapes[ours][1:]
        want = per[::-1] if transposed else per
        layers = [take(hf.format(l=l), want) for l in range(cfg.num_layers)]
        weights[ours] = np.stack([a.T if transposed else a for a in layers])
    if tensors:
        extra = sorted(n for n, _ in tensors.values())
        raise CheckpointError(f"{st_path}: tensors not in GPT2LMHeadModel: {extra[:5]}")
    return cfg, weights


def write_hf(folder, cfg, weights, prefix=True, dtype="f32"):
    """Writes folder/model.safetensors and folder/config.json (GPT2LMHeadModel layout)."""
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    from safetensors.numpy import save_file

    out_dtype = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}[dtype]
    pre = "transformer." if prefix else ""
    V = cfg.vocab_size
    t = {}
    for ours, hf in _HF_GLOBAL:
        a = weights[ours][:V] if ours == "wte" else weights[ours]
        t[pre + hf] = a
    for ours, hf, transposed in _HF_LAYER:
        for l in range(cfg.num_layers):
            a = weights[ours][l]
            t[pre + hf.format(l=l)] = a.T if transposed else a
    t = {k: np.ascontiguousarray(np.asarray(v, np.float32).astype(out_dtype))
         for k, v in t.items()}
    save_file(t, str(folder / "model.safetensors"), metadata={"format": "pt"})
    hc = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
          "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
          "n_positions": cfg.max_seq_len, "n_ctx": cfg.max_seq_len, "n_embd": cfg.channels,
          "n_head": cfg.num_heads, "n_layer": cfg.num_layers, "n_inner": None,
          "vocab_size": V, "bos_token_id": V - 1, "eos_token_id": V - 1,
          "scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False,
          "reorder_and_upcast_attn": False, "tie_word_embeddings": True,
          "attn_pdrop": 0.0, "embd_pdrop": 0.0, "resid_pdrop": 0.0,
          "dtype": {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}[dtype]}
    with open(folder / "config.json", "w") as f:
        json.dump(hc, f, indent=2, sort_keys=True)
        f.write("\n")


# ---------------------------------------------------------------------------------------

def load(path):
    """(Config, weights) from an llm.c .bin, a .safetensors file or a folder holding one."""
    p = pathlib.Path(path)
    if not p.exists():
        raise CheckpointError(f"{p}: no such file")
    if p.is_dir() or p.suffix == ".safetensors":
        return read_hf(p)
    return read_llmc(p)


def random_weights(cfg, seed):
    """GPT-2-like random weights (llm.c's init scales) with non-trivial biases and norms.

    Every tensor gets nonzero values so that a loader that drops or swaps one is caught;
    the padded wte rows are zero, as llm.c writes them.
    """
    rng = np.random.default_rng(seed)
    L, C = cfg.num_layers, cfg.channels
    proj = 0.02 / np.sqrt(2 * L)  # GPT-2's scaled init of the residual projections
    scales = {"wte": 0.02, "wpe": 0.01, "ln1w": 0.1, "ln1b": 0.02, "qkvw": 0.02, "qkvb": 0.02,
              "attprojw": proj, "attprojb": 0.02, "ln2w": 0.1, "ln2b": 0.02, "fcw": 0.02,
              "fcb": 0.02, "fcprojw": proj, "fcprojb": 0.02, "lnfw": 0.1, "lnfb": 0.02}
    w = {}
    for name, shape in param_shapes(cfg).items():
        a = rng.standard_normal(shape, dtype=np.float32) * np.float32(scales[name])
        if name in ("ln1w", "ln2w", "lnfw"):
            a += np.float32(1.0)
        w[name] = a
    w["wte"][cfg.vocab_size:] = 0.0
    return w
