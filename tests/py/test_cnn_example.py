"""examples/cnn against JAX: examples/cnn/cnn_check.py makes the model (make_model.py, JAX
reference outputs of every layer), runs build/examples/cnn on the CPU backend and the
evaluator, and compares each layer (relative error <= 1e-5); the CPU run must have no
evaluator fallback."""
import os
import subprocess
import sys

import pytest

from conftest import BUILD, REPO

CNN = BUILD / "examples" / "cnn"


def test_cnn_matches_jax(tmp_path):
    pytest.importorskip("jax")
    if not os.access(CNN, os.X_OK):
        pytest.skip("%s not built (make %s)" % (CNN, CNN))
    r = subprocess.run([sys.executable, str(REPO / "examples" / "cnn" / "cnn_check.py"), "--bin", str(CNN),
                        "--dir", str(tmp_path), "--backend", "cpu,interp"], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "evaluator_fallbacks=0" in r.stdout and "every layer matches JAX" in r.stdout, r.stdout
