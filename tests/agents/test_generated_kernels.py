"""LinUCB's lane kernels generated for each context dimension (``agents._kernels.linucb_kernels``):
written to a file once, cached on disk by numba, so that each new process loads them instead
of compiling them (4 s of CPU at d = 10); never the cached code of an older ``_kernels.py``."""

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from agents import _kernels as kn

ROOT = Path(__file__).resolve().parents[2]

#: A batched LinUCB of 3 copies, d = 3: one step (act, update) and a replay; prints the
#: numbers and, for each generated kernel, its loads from numba's cache and its compilations.
SNIPPET = """
import json
import numpy as np
import agents
from agents import _kernels as kn
from tests.agents.test_bandits import random_stream

X, avail, R = random_stream(5, 40, 4, 3)
logged = np.array([np.flatnonzero(row)[0] for row in avail], dtype=np.int64)
copies = []
for i in range(3):
    a = agents.LinUCB(alpha=0.5, ridge=2.0)
    a.reset(np.random.default_rng([5, i]))
    copies.append(a)
batched = type(copies[0]).batch(copies)
acts = batched.act(X[:3], avail[:3])
batched.update(np.ones(3, bool), X[:3], acts, R[np.arange(3), acts])
index = np.random.default_rng(5).integers(0, 40, size=(3, 30))
out = batched.replay_arrays(X, avail, logged, R[np.arange(40), logged], index=index)
m = kn.linucb_kernels(3)
print(json.dumps({"numbers": [acts.tolist(), np.asarray(out).tolist()]} | {
    name: [sum(getattr(m, name).stats.cache_hits.values()),
           sum(getattr(m, name).stats.cache_misses.values())]
    for name in ("act_lanes", "linucb_update_unrolled", "replay_lanes")}))
"""


def _run() -> dict:
    done = subprocess.run([sys.executable, "-c", SNIPPET], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_new_process_loads_the_generated_kernels_from_disk():
    first, second = _run(), _run()
    assert second["numbers"] == first["numbers"]
    for name in ("act_lanes", "linucb_update_unrolled", "replay_lanes"):
        hits, compiled = second[name]
        assert hits >= 1 and compiled == 0, (name, second[name])


def test_the_generated_module_names_the_kernels_it_was_made_from():
    """Its name is the hash of its source, which holds the SHA-256 of ``_kernels.py`` and
    ``recloop_base/kernels.py`` as this process imported them: any change of the kernels its
    steps call, or of the compiler's options, makes another module, with an empty cache."""
    import recloop_base.kernels

    digest = hashlib.sha256(f"{Path(kn.__file__).read_text()}\0"
                            f"{Path(recloop_base.kernels.__file__).read_text()}".encode())
    source = kn._module_source(3)
    assert digest.hexdigest() in source
    module = kn.linucb_kernels(3)
    assert Path(module.__file__).read_text() == source
    assert hashlib.sha256(source.encode()).hexdigest()[:16] in module.__name__
    assert kn._module_source(4) != source  # one module for each d


def test_the_steps_are_the_kernels_bodies_this_process_imported(monkeypatch):
    """Taken from the source read at import, by name, not from the file when the module is
    generated: a process that outlives an edit of ``_kernels.py`` never files its old
    kernels under the new file's hash."""
    edited = kn._SOURCE.replace("        ptr[c] = p + 1\n", "        ptr[c] = p + 2\n")
    assert edited != kn._SOURCE
    source = kn._module_source(3)
    assert "ptr[c] = p + 1" in source and "ptr[c] = p + 2" not in source
    monkeypatch.setattr(kn, "_SOURCE", edited)
    other = kn._module_source(3)
    assert "ptr[c] = p + 2" in other
    assert other.splitlines()[1] != source.splitlines()[1]  # another hash


def test_a_damaged_file_is_written_again(tmp_path, monkeypatch):
    monkeypatch.setattr(kn, "_folders", lambda: [str(tmp_path / "generated")])
    path = Path(kn._module_file("m", "x = 1\n"))
    assert path.parent == tmp_path / "generated"
    assert path.stat().st_mode & 0o777 == 0o644
    path.write_text("import os  # not what was generated\n")
    assert kn._module_file("m", "x = 1\n") == str(path)
    assert path.read_text() == "x = 1\n"
    assert [p.name for p in path.parent.iterdir()] == ["m.py"]  # no temporary file left


def test_a_new_module_removes_the_older_ones_of_its_d(tmp_path, monkeypatch):
    folder = tmp_path / "generated"
    (folder / "__pycache__").mkdir(parents=True)
    for name in ("linucb_d3_0123456789abcdef", "linucb_d30_0123456789abcdef"):
        (folder / f"{name}.py").write_text("x = 0\n")
        (folder / "__pycache__" / f"{name}.act_lanes-79.py311.nbi").write_text("")
    monkeypatch.setattr(kn, "_folders", lambda: [str(folder)])
    kn._module_file("linucb_d3_fedcba9876543210", "x = 1\n")
    assert sorted(p.name for p in folder.glob("*.py")) == [
        "linucb_d30_0123456789abcdef.py", "linucb_d3_fedcba9876543210.py"]
    assert [p.name for p in (folder / "__pycache__").iterdir()] == [
        "linucb_d30_0123456789abcdef.act_lanes-79.py311.nbi"]


def test_the_users_cache_is_used_where_the_package_cannot_be_written(tmp_path, monkeypatch):
    (tmp_path / "package").write_text("")  # a file: no folder can be made in it
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(kn, "__file__", str(tmp_path / "package" / "_kernels.py"))
    assert kn._module_file("m", "x = 1\n") == str(tmp_path / "cache" / "recloop" /
                                                   "generated" / "m.py")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "package" / "cache"))
    assert kn._module_file("m", "x = 1\n") is None


def test_where_no_file_can_be_written_the_kernels_are_compiled_in_memory(monkeypatch):
    import sys

    monkeypatch.setattr(kn, "_module_file", lambda name, source: None)
    monkeypatch.setattr(kn, "_MODULES", {})
    name = (f"agents._generated.linucb_d2_"
            f"{hashlib.sha256(kn._module_source(2).encode()).hexdigest()[:16]}")
    monkeypatch.delitem(sys.modules, name, raising=False)  # the file-backed one comes back
    module = kn.linucb_kernels(2)
    assert module.__file__ is None and sys.modules[name] is module
    g = np.random.default_rng(1)
    K, d, B = 3, 2, 4
    Ainv = np.broadcast_to(np.eye(d)[None, :, :, None], (K, d, d, B)).copy()
    theta = g.normal(size=(K, d, B))
    X, avail = g.normal(size=(B, d)), np.ones((B, K), bool)
    buf, out = g.random((B, 8)), np.empty(B, np.int64)
    ptr = np.zeros(B, np.int64)
    assert module.act_lanes(Ainv, theta, 0.5, X, avail, buf, ptr, out) == 0
    want, ptr2 = np.empty(B, np.int64), np.zeros(B, np.int64)
    kn.linucb_act_lanes.py_func(Ainv, theta, 0.5, X, avail, buf, ptr2, want,
                                module.linucb_scores_unrolled.py_func)
    assert np.array_equal(out, want) and np.array_equal(ptr, ptr2)
