"""Writes random-weight GPT-2 checkpoints (llm.c .bin and/or Hugging Face safetensors).

The weights come from tests/reference/gpt2_io.random_weights(config, seed): GPT-2's init
scales, nonzero biases and norms, zero padding rows; the same seed gives the same bytes.
Nothing written here is committed: the default output folder is build/gpt2-ckpt/.

Presets (any field can be overridden):
    small   L=2  C=64  NH=4  V=512    maxT=128   (Vp 512)   ~0.2 M parameters
    odd     L=2  C=64  NH=4  V=500    maxT=128   (Vp 512)   V not a multiple of 128
    124m    L=12 C=768 NH=12 V=50257  maxT=1024  (Vp 50304) GPT-2 small's shape, ~124 M

Files for preset P (in --out):
    P.bin        llm.c version 3 (f32)         P_bf16.bin   llm.c version 5 (bf16)
    P_hf/        model.safetensors (with the `transformer.` prefix) + config.json
    P_hf_noprefix/  the same tensors without the prefix

Examples:
    python tests/gen/gen_gpt2_checkpoints.py --preset small
    python tests/gen/gen_gpt2_checkpoints.py --preset 124m --formats llmc
    python tests/gen/gen_gpt2_checkpoints.py --L 3 --C 96 --NH 6 --V 777 --maxT 64 --seed 7 \
        --name custom --formats llmc,bf16,hf
"""

import argparse
import pathlib
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "reference"))
import gpt2_io  # noqa: E402

PRESETS = {
    "small": dict(L=2, C=64, NH=4, V=512, maxT=128),
    "odd": dict(L=2, C=64, NH=4, V=500, maxT=128),
    "124m": dict(L=12, C=768, NH=12, V=50257, maxT=1024),
}
FORMATS = ("llmc", "bf16", "hf", "hf_noprefix")


def make_config(L, C, NH, V, maxT, Vp=None):
    return gpt2_io.Config(max_seq_len=maxT, vocab_size=V,
                          padded_vocab_size=Vp or gpt2_io.padded_vocab(V), num_layers=L,
                          num_heads=NH, channels=C)


def write(out, name, cfg, seed, formats):
    """Writes the chosen |formats| of one random model; returns the paths written."""
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    w = gpt2_io.random_weights(cfg, seed)
    paths = []
    if "llmc" in formats:
        paths.append(out / f"{name}.bin")
        gpt2_io.write_llmc(paths[-1], cfg, w, "f32")
    if "bf16" in formats:
        paths.append(out / f"{name}_bf16.bin")
        gpt2_io.write_llmc(paths[-1], cfg, w, "bf16")
    if "hf" in formats:
        paths.append(out / f"{name}_hf")
        gpt2_io.write_hf(paths[-1], cfg, w, prefix=True)
    if "hf_noprefix" in formats:
        paths.append(out / f"{name}_hf_noprefix")
        gpt2_io.write_hf(paths[-1], cfg, w, prefix=False)
    return paths


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", choices=sorted(PRESETS), default="small")
    for f in ("L", "C", "NH", "V", "maxT", "Vp"):
        ap.add_argument(f"--{f}", type=int)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--name", help="file stem (default: the preset's name)")
    ap.add_argument("--formats", default="llmc,bf16,hf,hf_noprefix",
                    help=f"comma-separated subset of {','.join(FORMATS)}")
    ap.add_argument("--out", default=str(REPO / "build" / "gpt2-ckpt"))
    a = ap.parse_args(argv)
    p = dict(PRESETS[a.preset])
    for f in ("L", "C", "NH", "V", "maxT"):
        if getattr(a, f) is not None:
            p[f] = getattr(a, f)
    formats = [f for f in a.formats.split(",") if f]
    for f in formats:
        if f not in FORMATS:
            ap.error(f"unknown format {f!r}")
    cfg = make_config(p["L"], p["C"], p["NH"], p["V"], p["maxT"], a.Vp)
    t0 = time.time()
    paths = write(a.out, a.name or a.preset, cfg, a.seed, formats)
    print(f"{cfg} seed {a.seed}: {gpt2_io.num_params(cfg):,} parameters, "
          f"{time.time() - t0:.1f} s")
    for path in paths:
        print(f"  wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
