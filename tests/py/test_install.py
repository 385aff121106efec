"""`make install PREFIX=...` and pkg-config: a program built with nothing but
`cc prog.c $(pkg-config --cflags --libs hlojit)` against a temporary prefix runs.

The program uses the installed header only: a graph with a donated state and a linear
layer, compiled by the default backend (the CPU backend: libLLVM must come from the .pc
file's Libs), run twice; its printed values are checked against NumPy. `make uninstall`
removes the files again.
"""
import os
import shutil
import subprocess

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PROG = r"""
#include <hlojit.h>
#include <stdio.h>
int main(void) {
  hj_ctx_t *ctx;
  if (hj_ctx_create(NULL, &ctx)) return 2;
  hj_graph_t *g;
  hj_graph_create(ctx, "prog", &g);
  hj_tensor_t s = hj_param(g, HJ_F32, HJ_SHAPE(1, 3), "state");       /* donated */
  hj_tensor_t w = hj_param(g, HJ_F32, HJ_SHAPE(2, 3), "w");           /* (out, in) */
  hj_tensor_t y = hj_linear(s, w, HJ_NONE, HJ_LINEAR_OUT_IN);         /* (1, 2) */
  hj_graph_output_aliased(g, hj_add(s, hj_scalar(g, HJ_F32, 1)), s);
  hj_graph_output_named(g, y, "y");
  hj_exec_t *e;
  if (hj_compile(g, &e)) { fprintf(stderr, "%s\n", hj_ctx_error(ctx)); return 1; }
  float sv[3] = { 1, 2, 3 }, wv[6] = { 1, 0, -1, 0.5f, 0.25f, 2 };
  hj_buffer_t *in[2], *out[2] = { NULL, NULL };
  hj_buffer_from_host(ctx, HJ_F32, HJ_SHAPE(1, 3), sv, &in[0]);
  hj_buffer_from_host(ctx, HJ_F32, HJ_SHAPE(2, 3), wv, &in[1]);
  hj_exec_bind_name(e, "w", in[1]);
  for (int r = 0; r < 2; r++) {
    out[0] = in[0];
    if (hj_exec_run(e, in, 1, out, 2)) { fprintf(stderr, "%s\n", hj_ctx_error(ctx)); return 1; }
    const float *p = hj_buffer_host_ptr(out[1]);
    printf("%g %g\n", p[0], p[1]);
    hj_buffer_destroy(out[1]);
    out[1] = NULL;
  }
  const float *st = hj_buffer_host_ptr(in[0]);
  printf("%g %g %g %s\n", st[0], st[1], st[2], hj_exec_backend(e) == HJ_BACKEND_CPU ? "cpu" : "other");
  hj_buffer_destroy(in[0]);
  hj_buffer_destroy(in[1]);
  hj_exec_destroy(e);
  hj_graph_destroy(g);
  hj_ctx_destroy(ctx);
  return 0;
}
"""


def test_install_and_pkg_config(tmp_path):
    if not shutil.which("pkg-config"):
        pytest.skip("pkg-config is not installed")
    prefix = tmp_path / "prefix"
    env = dict(os.environ)
    env.pop("MAKEFLAGS", None)
    r = subprocess.run(["make", "--no-print-directory", "-C", ROOT, "install", f"PREFIX={prefix}"],
                       capture_output=True, text=True, timeout=1200, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    for f in ["include/hlojit.h", "lib/libhlojit.a", "lib/libhlojit.so", "bin/hlojit",
              "lib/pkgconfig/hlojit.pc"]:
        assert (prefix / f).is_file(), f
    env["PKG_CONFIG_PATH"] = str(prefix / "lib" / "pkgconfig")
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "hlojit"], capture_output=True, text=True,
                           env=env, check=True).stdout.split()
    llvm = subprocess.run(["llvm-config-19", "--libs"], capture_output=True, text=True).stdout.split()
    assert "-lhlojit" in flags and all(f in flags for f in llvm), flags
    src = tmp_path / "prog.c"
    src.write_text(PROG)
    exe = tmp_path / "prog"
    cc = os.environ.get("CC", "cc")
    r = subprocess.run([cc, str(src), "-o", str(exe)] + flags, capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = [l.split() for l in r.stdout.splitlines()]
    w = np.array([[1, 0, -1], [0.5, 0.25, 2]], np.float64)
    s = np.array([1, 2, 3], np.float64)
    for k in range(2):
        np.testing.assert_allclose([float(v) for v in lines[k]], w @ (s + k), rtol=1e-6)
    assert [float(v) for v in lines[2][:3]] == list(s + 2) and lines[2][3] == "cpu"
    r = subprocess.run(["make", "--no-print-directory", "-C", ROOT, "uninstall", f"PREFIX={prefix}"],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0 and not (prefix / "include" / "hlojit.h").exists()
