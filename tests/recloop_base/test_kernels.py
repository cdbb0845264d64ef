"""recloop_base.kernels: kernels written in a file are cached on disk, generated ones are not
(and still compile), and a cached kernel computes what its Python function computes."""

import subprocess
import sys
import textwrap

import numpy as np

from recloop_base.kernels import jit


def _double(x):
    return 2.0 * x


def test_a_kernel_from_a_file_is_cached_and_a_generated_one_compiles_without_a_file():
    from numba.core.caching import NullCache

    cached = jit(_double)
    assert not isinstance(cached._cache, NullCache)
    ns = {}
    exec(compile("def gen(x):\n    return 3.0 * x\n", "<generated>", "exec"), ns)
    generated = jit(ns["gen"])
    assert isinstance(generated._cache, NullCache)
    assert cached(1.5) == 3.0 and generated(1.5) == 4.5


def test_a_second_process_loads_the_kernel_it_compiled_and_gets_the_same_numbers(tmp_path):
    # a module of its own in a fresh folder: the first process compiles and writes the cache,
    # the second loads it (numba's stats: no compilation), both print the same bytes
    (tmp_path / "kmod.py").write_text(textwrap.dedent("""
        import numpy as np
        from recloop_base.kernels import jit

        def _f(x):
            s = 0.0
            for v in x:
                s += v * v
            return s

        f = jit(_f)
        x = np.random.default_rng(0).random(1000)
        print(repr(f(x)), sum(f.stats.cache_hits.values()), sum(f.stats.cache_misses.values()))
    """))
    run = [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(tmp_path)!r}); "
                                 "import kmod"]
    first = subprocess.run(run, capture_output=True, text=True, check=True).stdout.split()
    second = subprocess.run(run, capture_output=True, text=True, check=True).stdout.split()
    assert first[1:] == ["0", "1"]  # compiled and written
    assert second[1:] == ["1", "0"]  # loaded, not compiled
    assert first[0] == second[0] == repr(float(_sum_squares()))
    assert len(list((tmp_path / "__pycache__").glob("kmod._f-*.nbi"))) == 1


def _sum_squares():
    s = 0.0
    for v in np.random.default_rng(0).random(1000):
        s += v * v
    return s
