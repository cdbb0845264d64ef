"""Importing the packages stays light: numba, scipy.stats and scipy.optimize load only when
a kernel, a statistical check or a fit needs them."""

import subprocess
import sys

import pytest

HEAVY = ("numba", "scipy.stats", "scipy.optimize")


@pytest.mark.parametrize("package", ["simulator", "agents", "evaluators", "recloop"])
def test_import_loads_no_heavy_module(package):
    code = (f"import sys, {package}; "
            f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "", f"import {package} loaded {out}"


def test_first_kernel_access_compiles_the_agent_kernels_together():
    code = ("import sys; from agents import _kernels as kn; assert 'numba' not in sys.modules; "
            "f = kn.linucb_act_one; import numba; "
            "assert isinstance(f, numba.core.registry.CPUDispatcher); "
            "assert isinstance(kn.pick, numba.core.registry.CPUDispatcher)")
    subprocess.run([sys.executable, "-c", code], check=True)
