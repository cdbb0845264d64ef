"""Users' code is a guest (issue 25, section 1; issue 36): what surrounds every call into a
plugin -- an agent or estimator named by import path or entry point -- so that no plugin can
end the run, hang it, corrupt what later estimators see, or slip an impossible number into
the results.

* **Exits.** ``sys.exit()`` in users' code becomes :class:`UserCodeError` naming the plugin
  (the cell fails, the run goes on, ``--resume`` retries it). ``os._exit()`` cannot be caught
  in the process that calls it, so users' code never runs in recloop's main process during a
  run (cells that run it go to worker processes, whose death fails the cell, see
  :mod:`recloop._workers`), and at validation its calls run on a thread of
  :func:`run_guarded`, with ``os._exit`` replaced by an exception while they run.
* **Time.** Each call of users' code announces itself (:func:`section`): at validation a
  call has :data:`TRIAL_TIMEOUT` seconds; in a cell the worker's parent stops the cell when
  no sign of progress -- a loop's step, a call of users' code starting or returning -- came
  for ``[run] plugin_timeout`` seconds.
* **Inputs.** An estimator gets its own read-only views of the log and of ``action_dist``
  (:func:`read_only`: a copy of the log object, views whose ``WRITEABLE`` flag cannot be set
  back; copies of what a view cannot protect, object arrays), and a checksum of the shared
  inputs (:func:`fingerprint`) taken before and after each call catches what a view cannot
  stop (writing through ``.base``): the cell fails naming the estimator, since every
  estimate after it would be computed on changed data.
* **Results.** :func:`implausible` names an estimate that cannot be right -- infinite, a
  negative standard error, an inverted interval or one that excludes its own estimate, a
  value beyond what any weighted mean of the log's rewards can reach; the harness records
  it as ``nan`` with the reason in ``errors.log``, like an estimator that raised.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import threading
import zlib

__all__ = ["TRIAL_TIMEOUT", "UserCodeError", "fingerprint", "implausible", "inputs_after",
           "inputs_before", "last_section", "read_only", "run_guarded", "section",
           "set_section_hook"]

#: Seconds a call of users' code may take at validation (its trial on a small problem).
TRIAL_TIMEOUT = 60.0


class UserCodeError(BaseException):
    """Users' code did what the harness cannot survive inside a cell: ended the process, or
    changed inputs other estimators share. A ``BaseException`` (like ``SystemExit``, which it
    replaces) so that an experiment's ``except Exception`` around one estimator does not
    swallow it: the cell fails with this message."""


# --- sections: which users' code is running ---------------------------------------------------

_hook = [None]  # callable(what or None) of the process (a worker tells its parent)
_state = threading.local()
_last = [""]


def set_section_hook(hook) -> None:
    """``hook(what)`` when a call of users' code starts, ``hook(None)`` when it returns."""
    _hook[0] = hook


def last_section() -> str:
    """The users' code called last in this process (``""``: none yet)."""
    return _last[0]


@contextlib.contextmanager
def section(what: str):
    """A call of users' code, ``what`` naming it (``"estimator 'x' (import path m:f)"``):
    announced to the hook, and ``SystemExit`` inside it becomes :class:`UserCodeError`."""
    outer = getattr(_state, "what", None)
    _state.what = _last[0] = what
    if _hook[0] is not None:
        _hook[0](what)
    try:
        yield
    except SystemExit as exc:
        raise UserCodeError(f"{what} called sys.exit({exc.code!r})") from None
    finally:
        _state.what = outer
        if _hook[0] is not None:
            _hook[0](outer)


# --- validation: users' code on a thread, os._exit caught -------------------------------------

_exit_lock = threading.Lock()
_exit_users = [0]
_real_exit = os._exit


class _Exited(BaseException):
    pass


def _refuse_exit(code=0):
    raise _Exited(code)


def run_guarded(fn, *args, what: str, timeout: float = TRIAL_TIMEOUT, **kwargs):
    """``fn(*args, **kwargs)`` on a thread of this process, for validation's calls of users'
    code: its result, or its exception re-raised; :class:`UserCodeError` when it calls
    ``sys.exit`` or ``os._exit`` (replaced while it runs) or runs past ``timeout`` seconds
    (the thread is then left behind as a daemon: a Python thread cannot be killed, and the
    command ends soon after with the problem reported)."""
    out: dict = {}

    def target():
        try:
            out["value"] = fn(*args, **kwargs)
        except _Exited as exc:
            out["exit"] = f"os._exit({exc.args[0]!r})"
        except SystemExit as exc:
            out["exit"] = f"sys.exit({exc.code!r})"
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            out["error"] = exc
        finally:
            _release_exit()

    _hold_exit()
    thread = threading.Thread(target=target, name="recloop-users-code", daemon=True)
    try:
        thread.start()
    except BaseException:
        _release_exit()
        raise
    thread.join(timeout)
    if thread.is_alive():
        raise UserCodeError(f"{what} did not return within {timeout:g} s (the time limit of "
                            "a trial call at validation)")
    if "exit" in out:
        raise UserCodeError(f"{what} called {out['exit']}")
    if "error" in out:
        raise out["error"]
    return out.get("value")


def _hold_exit() -> None:
    with _exit_lock:
        _exit_users[0] += 1
        os._exit = _refuse_exit


def _release_exit() -> None:
    with _exit_lock:
        _exit_users[0] -= 1
        if _exit_users[0] == 0:
            os._exit = _real_exit


# --- inputs: read-only views, checksums --------------------------------------------------------

def read_only(obj):
    """``obj`` for one estimator: arrays as read-only views, dataclasses (logs) as shallow
    copies holding such views (so ``object.__setattr__`` on them changes nothing shared),
    dicts, lists and tuples rebuilt of the same; anything else as it is."""
    import numpy as np

    if isinstance(obj, np.ndarray) and obj.dtype != object:
        owner = obj.base if isinstance(obj.base, np.ndarray) else obj  # numpy keeps the owner
        if not owner.flags.writeable:  # a view of it cannot be made writeable: cheap
            view = obj.view()
            view.flags.writeable = False
            return view
        # a plain view's WRITEABLE flag can be set back when the owner is writeable;
        # as_strided's view has a non-array base that exports no writeable buffer, so
        # setflags(write=True) is refused (only a deliberate walk up ``.base`` gets through,
        # and the checksum catches that)
        from numpy.lib.stride_tricks import as_strided

        return as_strided(obj, shape=obj.shape, strides=obj.strides, writeable=False)
    if isinstance(obj, np.ndarray):  # objects inside could be changed through a view
        return obj.copy()
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        import copy

        twin = copy.copy(obj)
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name, None)
            theirs = read_only(value)
            if theirs is not value:
                object.__setattr__(twin, f.name, theirs)
        return twin
    if isinstance(obj, dict):
        return {k: read_only(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)) and not hasattr(obj, "_fields"):
        return type(obj)(read_only(v) for v in obj)
    return obj


def fingerprint(*objs) -> int:
    """A CRC-32 of the arrays and plain values in ``objs`` (dataclass fields, dicts, lists;
    sparse matrices by their arrays); callables and other objects by type only.

    CRC-32, not a cryptographic hash: it sees any change an estimator makes by accident or
    by a plain write (a change escapes it with probability 2^-32), at 1.7 GB/s against
    BLAKE2b's 0.3 GB/s -- 47 ms for an ``action_dist`` of 2,000 x 5,000 against 270 ms
    (IPS takes 17 ms there). Code set on changing memory unseen can do it anyway, in its
    own process."""
    h = _Crc()
    for obj in objs:
        _feed(h, obj)
    return h.value


class _Crc:
    def __init__(self):
        self.value = 0

    def update(self, data) -> None:
        self.value = zlib.crc32(data, self.value)


#: ``(log, x, fingerprint)`` after the last call of a guest estimator: the "before" of the
#: next one on the same inputs (recloop's own estimators between them do not write), so that
#: k guest estimators on one input cost k + 1 checksums, not 2 k.
_last_checked: list = [None]


def inputs_before(log, x) -> int:
    """The fingerprint of a guest call's inputs before the call."""
    last = _last_checked[0]
    if last is not None and last[0] is log and last[1] is x:
        return last[2]
    return fingerprint(log, x)


def inputs_after(log, x) -> int:
    """The fingerprint after the call (kept, with the inputs, for the next call)."""
    digest = fingerprint(log, x)
    _last_checked[0] = (log, x, digest)
    return digest


def _feed(h, obj) -> None:
    import numpy as np

    if isinstance(obj, np.ndarray):
        h.update(f"a{obj.dtype.str}{obj.shape}".encode())
        if obj.dtype != object:
            h.update((obj if obj.flags.c_contiguous else np.ascontiguousarray(obj)).data)
        else:
            for x in obj.reshape(-1):
                _feed(h, x)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        h.update(type(obj).__qualname__.encode())
        for f in dataclasses.fields(obj):
            _feed(h, getattr(obj, f.name, None))
    elif isinstance(obj, dict):
        for k in sorted(obj, key=repr):
            h.update(repr(k).encode())
            _feed(h, obj[k])
    elif isinstance(obj, (list, tuple)):
        h.update(b"(")
        for x in obj:
            _feed(h, x)
        h.update(b")")
    elif obj is None or isinstance(obj, (bool, int, float, complex, str, bytes, np.generic)):
        h.update(repr(obj).encode())
    elif all(hasattr(obj, a) for a in ("data", "indices", "indptr")):  # scipy.sparse
        for a in ("data", "indices", "indptr"):
            _feed(h, getattr(obj, a))
        h.update(repr(getattr(obj, "shape", None)).encode())
    else:
        h.update(type(obj).__qualname__.encode())


# --- results: what no estimate of a mean reward can be -----------------------------------------

def implausible(value: float, stderr: float, ci_low: float, ci_high: float, log) -> str | None:
    """Why an estimate of a policy's mean reward on ``log`` cannot be right, or ``None``.

    ``nan`` is an estimator's way of saying "no estimate" and passes; so do a missing
    (``nan``) standard error or interval. Refused: an infinite value; a negative standard
    error; an interval with ``ci_low > ci_high`` or that excludes the estimate; a value
    outside ``[min(0, r_min) - W s, max(0, r_max) + W s]``, where ``r`` are the log's finite
    rewards, ``s = (r_max - r_min) + max |r|`` and ``W = 1 / min(pscore)`` bounds every
    importance weight -- the most any weighted mean of rewards and reward-model predictions
    within the rewards' range (IPS, DR, replay, ...) can reach.
    """
    if math.isinf(value):
        return f"an infinite estimate ({value})"
    if stderr < 0:
        return f"a negative standard error ({stderr!r})"
    if not math.isnan(ci_low) and not math.isnan(ci_high):
        if ci_low > ci_high:
            return f"an inverted interval [{ci_low!r}, {ci_high!r}]"
        if not math.isnan(value) and not ci_low <= value <= ci_high:
            return f"an interval [{ci_low!r}, {ci_high!r}] that excludes its estimate {value!r}"
    if math.isnan(value):
        return None
    import numpy as np

    reward = np.asarray(getattr(log, "reward", ()), dtype=np.float64)
    reward = reward[np.isfinite(reward)]
    if reward.size == 0:
        return None
    pscore = np.asarray(getattr(log, "pscore", ()), dtype=np.float64)
    pscore = pscore[np.isfinite(pscore) & (pscore > 0)]
    weight = 1.0 / float(pscore.min()) if pscore.size else float(reward.size)
    r_min, r_max = float(reward.min()), float(reward.max())
    reach = weight * ((r_max - r_min) + max(abs(r_min), abs(r_max)))
    low, high = min(0.0, r_min) - reach, max(0.0, r_max) + reach
    if not low <= value <= high:
        return (f"an estimate {value!r} that no weighted mean of this log's rewards (in "
                f"[{r_min:.4g}, {r_max:.4g}], importance weights at most {weight:.4g}) can "
                f"reach (at most [{low:.4g}, {high:.4g}])")
    return None

