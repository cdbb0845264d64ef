"""numba kernels compiled on first use: the one lazy-compilation mechanism of every package.

Importing a kernel module imports neither numba nor compiles anything (``tests/test_imports.py``
keeps it so). A kernel is written as a plain Python function (its reference: the tests run it
beside the compiled one) and compiled with ``numba.njit(nogil=True)`` -- the GIL released, so
that thread pools split the work -- the first time it is needed. Kernels written in a source
file are cached on disk (``cache=True``: numba's ``__pycache__`` beside the file, or its
user-wide cache when that is not writable), so that each new process -- a worker, a guest, a
command -- loads them instead of compiling them again; numba keys the cache on the source
file and the closure's contents, and compiles again when either changed. Kernels generated at
run time are cached only if their source is written to a file first (``agents._kernels``'
unrolled LinUCB steps: :func:`agents._kernels.linucb_kernels`); a kernel that takes another
as an argument, or closes over one, is compiled again in each process:

* :func:`compiled` ``(py_fn)`` for a self-contained kernel: one compiled dispatcher per
  Python function, made once per process (thread-safe);
* :class:`LazyKernels` for a module whose kernels call one another: ``@kernels.kernel``
  registers them, ``__getattr__ = kernels.install()`` at the end of the module hides them, and
  the first access to any of them (``module.name``) compiles them all into the module's
  namespace *before* any is compiled, so that a kernel's calls resolve to the compiled
  versions.
"""

from __future__ import annotations

import threading

__all__ = ["LazyKernels", "compiled", "jit"]

_LOCK = threading.RLock()
_CACHE: dict = {}


def jit(fn):
    """``numba.njit(cache=..., nogil=True)(fn)`` (imports numba): cached on disk when ``fn``
    is written in a source file, not when it was generated at run time."""
    import os

    from numba import njit

    return njit(cache=os.path.isfile(fn.__code__.co_filename), nogil=True)(fn)


def compiled(py_fn):
    """The compiled kernel of ``py_fn``, compiled on the first request (once per process)."""
    fn = _CACHE.get(py_fn)
    if fn is None:
        with _LOCK:
            fn = _CACHE.get(py_fn)
            if fn is None:
                fn = _CACHE[py_fn] = jit(py_fn)
    return fn


class LazyKernels:
    """The kernels of one module, compiled together on first access (see the module doc).

    ``namespace`` is the module's ``globals()``; ``lock`` guards the compilation and may guard
    the module's own caches of generated kernels.
    """

    def __init__(self, namespace: dict):
        self.namespace = namespace
        self.py: dict = {}  # kernel name -> plain Python function
        self.lock = _LOCK

    def kernel(self, fn):
        """Register a kernel (decorator); it stays a plain function until :meth:`install`."""
        self.py[fn.__name__] = fn
        return fn

    def compile_all(self) -> None:
        """Wrap every registered kernel into the namespace (once; later calls return)."""
        ns = self.namespace
        with self.lock:
            if all(name in ns for name in self.py):
                return
            for name, fn in self.py.items():
                ns[name] = jit(fn)

    def install(self):
        """Remove the plain kernels from the namespace and return the module ``__getattr__``
        that compiles them on first access."""
        for name in self.py:
            self.namespace.pop(name, None)
        module = self.namespace.get("__name__", "?")

        def __getattr__(name):
            if name in self.py:
                self.compile_all()
                return self.namespace[name]
            raise AttributeError(f"module {module!r} has no attribute {name!r}")

        return __getattr__
