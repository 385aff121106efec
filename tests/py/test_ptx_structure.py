"""What the CUDA backend's kernels are made of, read off their PTX (`hlojit ptx`, no GPU),
and what NVIDIA's ptxas says of them (`ptxas -v`: registers, spills, shared memory):

- the loop kernel reads and writes 16 bytes at a time (ld.global.nc.v4.f32 /
  st.global.v4.f32), for both archs;
- the transpose kernel goes through the padded 32 x 33 shared tile (4224 bytes of f32),
  with a barrier between writing and reading it;
- the row reduction uses warp shuffles (shfl.sync.down), and for long rows also shared
  memory across warps; the column reduction a shared tile;
- the tiled matmul stages A and B in shared memory with barriers, loads them as float4,
  and each float it reads from shared memory feeds 4 FMAs (an 8x8 register block: 16
  floats per k step, 64 FMAs); ptxas reports no spills;
- the in-place dynamic-update-slice (KV cache) is one small kernel, and a decode step's
  query slice and both cache updates are one kernel that stores only q, k and v;
- `hlojit ptx` itself: both archs, an unknown arch refused, several modules at once.
Skipped, saying so, where the build has no CUDA backend; the ptxas checks where there is
no ptxas ($HLOJIT_PTXAS, $CUDA_HOME/bin/ptxas, /usr/local/cuda/bin/ptxas)."""
import os
import re
import subprocess

import pytest

from conftest import HLOJIT


def ptxas_path():
    env = os.environ.get("HLOJIT_PTXAS")
    if env:
        return env if os.path.exists(env) else None
    for home in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if home and os.path.exists(os.path.join(home, "bin", "ptxas")):
            return os.path.join(home, "bin", "ptxas")
    return None


def ptx_of(tmp_path, text, arch="sm_80"):
    p = tmp_path / "m.hlo"
    p.write_text(text)
    r = subprocess.run([str(HLOJIT), "ptx", str(p), "--arch", arch], capture_output=True, text=True)
    if r.returncode != 0 and "not part of this build" in r.stderr:
        pytest.skip("the CUDA backend is not in this build")
    assert r.returncode == 0, r.stderr
    return r.stdout


def kernels(ptx):
    """{name: body} for every .entry of |ptx|."""
    out = {}
    starts = [(m.start(), m.group(1)) for m in re.finditer(r"^\.(?:visible\s+)?\.entry\s+(\w+)\(", ptx, re.M)]
    for i, (s, name) in enumerate(starts):
        out[name] = ptx[s:starts[i + 1][0] if i + 1 < len(starts) else len(ptx)]
    return out


def only_kernel(ptx):
    ks = kernels(ptx)
    assert len(ks) == 1, list(ks)
    return next(iter(ks.values()))


def ptxas_v(ptx, arch):
    exe = ptxas_path()
    if not exe:
        return None
    r = subprocess.run([exe, "-arch=%s" % arch, "-v", "-o", "/dev/null", "-"], input=ptx,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    info = {}
    cur = None
    for line in (r.stdout + r.stderr).splitlines():
        m = re.search(r"Compiling entry function '(\w+)'", line)
        if m:
            cur = info.setdefault(m.group(1), {})
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and cur is not None:
            cur["spills"] = int(m.group(1)) + int(m.group(2))
        m = re.search(r"Used (\d+) registers", line)
        if m and cur is not None:
            cur["regs"] = int(m.group(1))
            s = re.search(r"(\d+) bytes smem", line)
            cur["smem"] = int(s.group(1)) if s else 0
    return info


GELU = """HloModule gelu
ENTRY main {
  x = f32[1024,1024] parameter(0)
  h = f32[] constant(0.5)
  hb = f32[1024,1024] broadcast(h), dimensions={}
  c = f32[] constant(0.7978845608)
  cb = f32[1024,1024] broadcast(c), dimensions={}
  x2 = f32[1024,1024] multiply(x, x)
  x3 = f32[1024,1024] multiply(x2, x)
  k = f32[] constant(0.044715)
  kb = f32[1024,1024] broadcast(k), dimensions={}
  t0 = f32[1024,1024] multiply(kb, x3)
  t1 = f32[1024,1024] add(x, t0)
  t2 = f32[1024,1024] multiply(cb, t1)
  t3 = f32[1024,1024] tanh(t2)
  one = f32[] constant(1)
  ob = f32[1024,1024] broadcast(one), dimensions={}
  t4 = f32[1024,1024] add(ob, t3)
  t5 = f32[1024,1024] multiply(hb, t4)
  ROOT y = f32[1024,1024] multiply(x, t5)
}
"""

TRANSPOSE = """HloModule tr
ENTRY main {
  p = f32[64,128] parameter(0)
  ROOT t = f32[128,64] transpose(p), dimensions={1,0}
}
"""

ROWS = """HloModule rows
add { a = f32[] parameter(0)
 b = f32[] parameter(1)
 ROOT s = f32[] add(a, b) }
ENTRY main {
  x = f32[%d,%d] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[%d] reduce(x, z), dimensions={1}, to_apply=add
}
"""

COLS = """HloModule cols
add { a = f32[] parameter(0)
 b = f32[] parameter(1)
 ROOT s = f32[] add(a, b) }
ENTRY main {
  x = f32[4096,512] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[512] reduce(x, z), dimensions={0}, to_apply=add
}
"""

MATMUL = """HloModule mm
ENTRY main {
  a = f32[512,768] parameter(0)
  b = f32[768,1024] parameter(1)
  c = f32[1024] parameter(2)
  d = f32[512,1024] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  cb = f32[512,1024] broadcast(c), dimensions={1}
  ROOT r = f32[512,1024] add(d, cb)
}
"""

KV = """HloModule kv, input_output_alias={ {}: (0, {}) }
ENTRY main {
  cache = f32[12,1024,64] parameter(0)
  upd = f32[12,1,64] parameter(1)
  t = s32[] parameter(2)
  z = s32[] constant(0)
  ROOT d = f32[12,1024,64] dynamic-update-slice(cache, upd, z, t, z)
}
"""


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_loop_vector_loads(tmp_path, arch):
    k = only_kernel(ptx_of(tmp_path, GELU, arch))
    assert "ld.global.nc.v4.f32" in k
    assert "st.global.v4.f32" in k
    assert ".maxntid 256" in k
    assert "ld.global.f32" not in k and "st.global.f32" not in k   # no scalar accesses at all
    info = ptxas_v(ptx_of(tmp_path, GELU, arch), arch)
    if info:
        assert all(v["spills"] == 0 for v in info.values()), info


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_transpose_padded_tile(tmp_path, arch):
    ptx = ptx_of(tmp_path, TRANSPOSE, arch)
    k = only_kernel(ptx)
    m = re.search(r"\.shared \.align \d+ \.b8 \w+_tile\[(\d+)\]", ptx)
    assert m, ptx[:2000]
    assert int(m.group(1)) == 32 * 33 * 4       # 32 x 33 floats: the padded row
    assert "bar.sync" in k
    assert "st.shared.f32" in k and "ld.shared.f32" in k
    info = ptxas_v(ptx, arch)
    if info:
        (v,) = info.values()
        assert v["smem"] == 32 * 33 * 4 and v["spills"] == 0


@pytest.mark.parametrize("rows,cols", [(64, 768), (8, 8192)])
def test_row_reduction_shuffles(tmp_path, rows, cols):
    ptx = ptx_of(tmp_path, ROWS % (rows, cols, rows))
    k = only_kernel(ptx)
    assert k.count("shfl.sync.down.b32") >= 5   # the warp tree: 16, 8, 4, 2, 1
    if cols > 2048:                             # a block per row: across warps via shared memory
        assert "bar.sync" in k and "st.shared" in k
    else:                                       # a warp per row, 8 rows per block: shuffles only
        assert "bar.sync" not in k and "shfl.sync.idx.b32" in k


def test_column_reduction_shared_tile(tmp_path):
    ptx = ptx_of(tmp_path, COLS)
    k = only_kernel(ptx)
    assert re.search(r"\.shared \.align \d+ \.b8 \w+_ctile0\[%d\]" % (8 * 33 * 4), ptx)
    assert "bar.sync" in k


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_matmul_tiles_and_register_block(tmp_path, arch):
    ptx = ptx_of(tmp_path, MATMUL, arch)
    ks = kernels(ptx)
    mm = [v for n, v in ks.items() if n.endswith("_mm")]
    assert len(mm) == 1, list(ks)
    k = mm[0]
    assert "bar.sync" in k
    assert re.search(r"\.shared \.align 16 \.b8 \w+_mm_as\[", ptx) and re.search(r"\.shared \.align 16 \.b8 \w+_mm_bs\[", ptx)
    assert "ld.global.nc.v4.f32" in k                      # float4 global loads
    fma = len(re.findall(r"\bfma\.rn\.f32\b", k))
    shared_floats = 4 * len(re.findall(r"ld\.shared\.v4\.f32", k)) + len(re.findall(r"ld\.shared\.f32", k))
    assert fma >= 512 and shared_floats > 0
    ratio = fma / shared_floats
    print("matmul %s: %d fma.rn.f32, %d floats loaded from shared memory: %.2f FMAs per float" %
          (arch, fma, shared_floats, ratio))
    assert ratio >= 3.9                                    # 8x8 register block: 64 FMAs per 16 floats
    assert any(n.endswith("_epi") for n in ks)             # the library path's epilogue kernel
    info = ptxas_v(ptx, arch)
    if info:
        name = [n for n in ks if n.endswith("_mm")][0]
        print("ptxas -v %s: %s" % (name, info[name]))
        assert info[name]["spills"] == 0


# A GPT-2 decode step's cache updates (C = 768, 12 heads), the caches donated: the query
# slice and both updates are one kernel that reads the qkv row and the position, and stores
# q, k and v, never touching the rest of either 3 MiB cache.
KV_STEP = """HloModule kv2, input_output_alias={ {1}: (1, {}), {2}: (2, {}) }
ENTRY main {
  qkv = f32[1,2304] parameter(0)
  kc = f32[12,64,1024] parameter(1)
  vc = f32[12,1024,64] parameter(2)
  t = s32[] parameter(3)
  z = s32[] constant(0)
  q = f32[1,768] slice(qkv), slice={[0:1], [0:768]}
  ks = f32[1,768] slice(qkv), slice={[0:1], [768:1536]}
  k = f32[12,64,1] reshape(ks)
  vs = f32[1,768] slice(qkv), slice={[0:1], [1536:2304]}
  v = f32[12,1,64] reshape(vs)
  dk = f32[12,64,1024] dynamic-update-slice(kc, k, z, z, t)
  dv = f32[12,1024,64] dynamic-update-slice(vc, v, z, t, z)
  ROOT r = (f32[1,768], f32[12,64,1024], f32[12,1024,64]) tuple(q, dk, dv)
}
"""


def test_dus_in_place(tmp_path):
    body = only_kernel(ptx_of(tmp_path, KV))   # the update only: the cache is donated
    assert len(re.findall(r"\bst\.global", body)) == 1
    assert len(re.findall(r"\bld\.global", body)) == 2   # the position and the update


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_decode_cache_updates_one_kernel(tmp_path, arch):
    ptx = ptx_of(tmp_path, KV_STEP, arch)
    body = only_kernel(ptx)
    assert len(re.findall(r"\bst\.global", body)) == 3      # q, k, v
    assert len(re.findall(r"\bld\.global", body)) == 4      # the position, three of qkv
    info = ptxas_v(ptx, arch)
    if info is None:
        pytest.skip("no ptxas")
    for name in info:
        print("ptxas -v %s: %s" % (name, info[name]))
        assert info[name]["spills"] == 0


def test_ptx_cli(tmp_path):
    a = tmp_path / "a.hlo"
    a.write_text(TRANSPOSE)
    b = tmp_path / "b.hlo"
    b.write_text(GELU)
    r = subprocess.run([str(HLOJIT), "ptx", str(a), "--arch", "sm_75"], capture_output=True, text=True)
    if "not part of this build" in r.stderr:
        pytest.skip("the CUDA backend is not in this build")
    assert r.returncode == 1 and "unknown CUDA arch 'sm_75'" in r.stderr
    r = subprocess.run([str(HLOJIT), "ptx", str(a), str(b)], capture_output=True, text=True)
    assert r.returncode == 1 and "several modules need --out-dir" in r.stderr
    out = tmp_path / "out"
    r = subprocess.run([str(HLOJIT), "ptx", "--arch", "sm_90a", "--out-dir", str(out), str(a), str(b)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert ".target sm_90a" in (out / "0.ptx").read_text()
    assert "ld.global.nc.v4.f32" in (out / "1.ptx").read_text()
    # the same module gives the same PTX (names are per module)
    r2 = subprocess.run([str(HLOJIT), "ptx", "--arch", "sm_90a", str(a)], capture_output=True, text=True)
    assert r2.stdout == (out / "0.ptx").read_text()
