"""The layer every recloop package stands on: argument validation, threads, lazy kernels.

``recloop_base`` imports numpy only (numba on first use of a kernel) and nothing of recloop's
other packages, so that ``simulator``, ``agents``, ``evaluators`` and the ``recloop`` harness
can all use it without breaking the one-way layering of ``docs/DESIGN.md``:

* :mod:`recloop_base.validation` -- one checker per kind of argument (``check_int``,
  ``check_float``, ``check_level``, ``as_generator``, ...) raising :class:`ArgumentError`
  subclasses that carry the argument's name, the rule and what was received as data;
* :mod:`recloop_base.threads` -- the thread budget of compiled kernels (``RECLOOP_THREADS``)
  and ``thread_map``;
* :mod:`recloop_base.fast_paths` -- when an agent's compiled shortcut (``replay_arrays``,
  ``batch``) may stand in for its ``act`` / ``update`` (:func:`~recloop_base.fast_paths.fast_path`);
* :mod:`recloop_base.executors` -- the ``executor=`` of large evaluations: partitions run on
  this process's threads or on a ``dask.distributed.Client`` (Dask imported only then);
* :mod:`recloop_base.guard` -- what surrounds a call of users' code in-process (exits,
  time limits, read-only inputs, checksums, impossible results): the harness's plugins and
  the estimator selectors' candidates share it.
"""
