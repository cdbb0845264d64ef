"""Users' code is a guest (issue 25, section 1; issue 36): what surrounds every call into a
plugin -- an agent or estimator named by import path or entry point -- so that no plugin can
end the run, hang it, corrupt what later estimators see, or slip an impossible number into
the results.

* **Processes.** Users' code is never imported in recloop's own process: it runs in *guest*
  processes (:class:`Guest`), fresh interpreters started for it (never a fork of recloop's
  process, never a re-run of the caller's script), each the leader of its own process group
  and the reaper of its orphaned descendants, so that :meth:`Guest.kill` ends the guest
  with every process it started, however it detached them. What a guest sends back is
  read by :func:`safe_loads`: plain data, numpy arrays and the result classes of recloop's
  own packages, never an object that runs code when it is read.
* **Exits.** ``sys.exit()`` in users' code becomes :class:`UserCodeError` naming the plugin
  (the cell fails, the run goes on, ``--resume`` retries it); so do the other exceptions
  outside ``Exception`` (``KeyboardInterrupt``, ``GeneratorExit``, a bare
  ``BaseException``). ``os._exit()`` cannot be caught in the process that calls it: it ends
  the guest, and the guest's parent names the users' code it was in. Inside a guest, calls
  run by :func:`run_guarded` (validation's trial calls; the estimator selectors' candidates,
  in-process) see ``os._exit`` replaced by an exception while they run.
* **Time.** Each call of users' code announces itself (:func:`section`), and a guest's
  parent stops it when no sign of progress -- a loop's step, a call of users' code starting
  or returning -- came for the unit's time limit, counted in the guest's own time
  (:meth:`Guest.own_seconds`: wall time less the time it waited for a CPU that other
  processes held), so that a loaded machine stretches no limit into a failure.
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

__all__ = ["TRIAL_TIMEOUT", "Guest", "UnsafeMessage", "UserCodeError", "death_message",
           "exception_line", "fingerprint", "implausible",
           "in_guest", "inputs_after", "inputs_before", "last_section", "read_only",
           "run_guarded", "safe_loads", "section", "set_section_hook"]

#: Seconds a call of users' code may take at validation (its trial on a small problem).
TRIAL_TIMEOUT = 60.0


class UserCodeError(BaseException):
    """Users' code did what the harness cannot survive inside a cell: ended the process, or
    changed inputs other estimators share. A ``BaseException`` (like ``SystemExit``, which it
    replaces) so that an experiment's ``except Exception`` around one estimator does not
    swallow it: the cell fails with this message."""


class _Exited(BaseException):
    """``os._exit`` called in a thread of :func:`run_guarded` (raised instead)."""


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
    except (UserCodeError, _Exited, Exception):  # (_Exited: run_guarded's to report)
        raise
    except BaseException as exc:  # KeyboardInterrupt, GeneratorExit, a bare BaseException
        raise UserCodeError(f"{what} raised {exception_line(exc)}") from None
    finally:
        _state.what = outer
        if _hook[0] is not None:
            _hook[0](outer)


def exception_line(exc: BaseException) -> str:
    """``"KeyboardInterrupt"``, ``"BaseException: why"``: an exception in one line."""
    text = str(exc).strip().splitlines()
    return type(exc).__name__ + (f": {text[0][:200]}" if text else "")


# --- users' code on a thread, os._exit caught -------------------------------------------------

_exit_lock = threading.Lock()
_exit_users = [0]
_real_exit = os._exit


_guarded_threads: set = set()


def _refuse_exit(code=0):
    # only in a thread run_guarded started: a thread the users' code started itself (a
    # timer set at import) ends the process as it asked, and the process's parent says so
    # -- an exception raised there would only print a traceback and change nothing
    if threading.get_ident() in _guarded_threads:
        raise _Exited(code)
    _real_exit(code)


def run_guarded(fn, *args, what: str, timeout: float = TRIAL_TIMEOUT, **kwargs):
    """``fn(*args, **kwargs)`` on a thread of this process, for validation's calls of users'
    code: its result, or its exception re-raised; :class:`UserCodeError` when it calls
    ``sys.exit`` or ``os._exit`` (replaced while it runs) or runs past ``timeout`` seconds
    (the thread is then left behind as a daemon: a Python thread cannot be killed, and the
    command ends soon after with the problem reported)."""
    out: dict = {}

    def target():
        _guarded_threads.add(threading.get_ident())
        if _hook[0] is not None:
            _hook[0](what)
        try:
            out["value"] = fn(*args, **kwargs)
        except _Exited as exc:
            out["exit"] = f"os._exit({exc.args[0]!r})"
        except SystemExit as exc:
            out["exit"] = f"sys.exit({exc.code!r})"
        except (UserCodeError, Exception) as exc:  # re-raised in the caller's thread
            out["error"] = exc
        except BaseException as exc:  # KeyboardInterrupt, GeneratorExit, ...
            out["exit"] = f"raised {exception_line(exc)}"
        finally:
            _guarded_threads.discard(threading.get_ident())
            if _hook[0] is not None:
                _hook[0](None)
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
        verb = "" if out["exit"].startswith("raised ") else "called "
        raise UserCodeError(f"{what} {verb}{out['exit']}")
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



# --- guest processes ------------------------------------------------------------------------------

#: Set in a guest process (:func:`in_guest`).
_IN_GUEST = [False]


def in_guest() -> bool:
    """Whether this process is a guest (:class:`Guest`): users' code may be imported here."""
    return _IN_GUEST[0]


#: What a guest's messages may name when read back (:func:`safe_loads`): besides plain data
#: (numbers, strings, bytes, lists, tuples, dicts, sets, ``None``), numpy's arrays, scalars
#: and dtypes, and the dataclasses and exceptions of recloop's own packages.
# _frombuffer is how numpy pickles an array at protocol 5 (the channel's): an array of the
# bytes given, reshaped; it refuses object dtypes
_NUMPY_GLOBALS = {("numpy", "dtype"), ("numpy", "ndarray"),
                  ("numpy._core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "scalar"),
                  ("numpy.core.multiarray", "_reconstruct"), ("numpy.core.multiarray", "scalar"),
                  ("numpy._core.numeric", "_frombuffer"), ("numpy.core.numeric", "_frombuffer")}
_BUILTIN_GLOBALS = {"complex", "set", "frozenset", "slice", "range"}
_OUR_PACKAGES = ("recloop", "recloop_base", "simulator", "agents", "evaluators")
#: Largest message a guest may send (bytes): a cell's rows and per-log estimates are far
#: below it.
MAX_MESSAGE = 2**30


class UnsafeMessage(Exception):
    """A guest sent something :func:`safe_loads` refuses to read (a global it may not name,
    a damaged message): the unit fails with this message."""


def _allowed(module: str, name: str):
    """The object a message may name as ``module.name``, or :class:`UnsafeMessage`."""
    import dataclasses
    import importlib

    if "." in name or name.startswith("__"):
        raise UnsafeMessage(f"a message named {module}.{name}, which it may not")
    if module == "builtins" and name in _BUILTIN_GLOBALS:
        import builtins

        return getattr(builtins, name)
    if (module, name) in _NUMPY_GLOBALS:
        return getattr(importlib.import_module(module), name)
    if module.split(".")[0] in _OUR_PACKAGES:
        try:
            obj = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            raise UnsafeMessage(f"a message named {module}.{name}, which does not exist"
                                ) from None
        if isinstance(obj, type) and getattr(obj, "__module__", None) == module and (
                dataclasses.is_dataclass(obj) or issubclass(obj, Exception)):
            return obj
    raise UnsafeMessage(f"a message named {module}.{name}, which it may not (only plain data, "
                        "numpy arrays and recloop's result classes cross back)")


def safe_loads(data: bytes):
    """Read a message a guest sent (``pickle.dumps`` of it) without letting it run code
    here: the only globals it may name are those of :func:`_allowed` -- numpy's array
    reconstructors and the dataclasses and exceptions of recloop's own packages, whose
    construction stores values and checks them. :class:`UnsafeMessage` otherwise."""
    import io
    import pickle

    class _Reader(pickle.Unpickler):
        def find_class(self, module, name):
            return _allowed(module, name)

    try:
        return _Reader(io.BytesIO(data)).load()
    except UnsafeMessage:
        raise
    except Exception as exc:
        raise UnsafeMessage(f"a damaged message ({type(exc).__name__}: {str(exc)[:120]})"
                            ) from None


_PR_SET_PDEATHSIG = 1         # <linux/prctl.h>
_PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, value: int) -> bool:
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _boot() -> None:
    """The first thing a :class:`Guest` process runs (``python -P -c``): read its settings,
    take the guest's place (the import path, the guest flag, the reaper of its orphans),
    then call its target with the channel to its parent."""
    import importlib
    import json
    import signal
    import sys
    from multiprocessing.connection import Connection

    target, fd, config = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
    conn = Connection(fd)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's business
    if sys.platform.startswith("linux"):
        # killed the moment its parent dies; its orphaned descendants stay its children,
        # so that the parent finds and ends them with it (Guest.kill)
        _prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL))
        if os.getppid() != config["parent"]:
            _real_exit(1)
        _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    sys.path[:] = list(dict.fromkeys(config["path"]))
    if config["guest"]:
        _IN_GUEST[0] = True
    module, _, name = target.partition(":")
    getattr(importlib.import_module(module), name)(conn, config.get("args"))


def _proc_stat(pid: int) -> tuple[str, int, int] | None:
    """``(state, parent pid, process group)`` of a process from ``/proc`` (``None``: gone or
    not Linux)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode("ascii", "replace")
    except OSError:
        return None
    fields = text.rsplit(")", 1)[-1].split()
    try:
        return fields[0], int(fields[1]), int(fields[2])
    except (IndexError, ValueError):
        return None


def _descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (by parent links) or in its process group."""
    table = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if name.isdigit():
            st = _proc_stat(int(name))
            if st is not None and st[0] != "Z":
                table[int(name)] = st
    found, todo = set(), [pid]
    while todo:
        parent = todo.pop()
        for child, (_, ppid, _) in table.items():
            if ppid == parent and child not in found and child != pid:
                found.add(child)
                todo.append(child)
    found |= {p for p, (_, _, pgid) in table.items() if pgid == pid and p != pid}
    return sorted(found)


def death_message(exitcode: int | None, *, guest: bool = False) -> str:
    """How a process ended: ``"was killed by SIGSEGV (signal 11: a crash in compiled
    code)"``, ``"exited with code 0 in the middle of the cell"`` (and ``"(os._exit in users'
    code?)"`` for a ``guest``)."""
    import signal

    if exitcode is None:
        return "stopped answering"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        why = {"SIGKILL": ": out of memory? the kernel's OOM killer sends it",
               "SIGSEGV": ": a crash in compiled code", "SIGBUS": ": a crash in compiled code",
               "SIGABRT": ": an abort, e.g. a failed assertion in compiled code"}.get(name, "")
        return f"was killed by {name} (signal {-exitcode}{why})"
    return (f"exited with code {exitcode} in the middle of the cell"
            + (" (os._exit in users' code?)" if guest else ""))


class Guest:
    """A process that runs ``target`` (``"module:function"``, called as ``function(conn,
    args)``) in a fresh interpreter: its own process group, the reaper of its orphans, dead
    with its parent, Ctrl-C left to the parent; ``guest=True`` marks it as a process where
    users' code may be imported (:func:`in_guest`), with ``paths`` first on its import path.

    The channel is a socket pair: :meth:`send` pickles (what recloop sends is its own),
    :meth:`recv` reads with :func:`safe_loads`. :meth:`kill` ends the process and every
    process it started. Linux gives the most: the parent-death signal, the reaping of
    orphans and :meth:`own_seconds`; elsewhere the process group alone is ended and the
    clock is the wall's.
    """

    def __init__(self, target: str, *, args=None, guest: bool, paths=(), env=None):
        import json
        import socket
        import subprocess
        import sys
        from multiprocessing.connection import Connection

        ours, theirs = socket.socketpair()
        path = [os.path.abspath(p) for p in paths] + [
            (p or os.getcwd()) for p in sys.path]
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        if root not in path:  # a source checkout that is not installed
            path.append(root)
        config = {"parent": os.getpid(), "guest": bool(guest), "path": path, "args": args}
        boot = "from recloop_base.guard import _boot; _boot()"
        # -P: neither the current folder nor the script's is put on the import path;
        # the parent's own import path is given instead (config["path"])
        command = [sys.executable, "-P", "-c",
                   f"import sys; sys.path.append({root!r}); {boot}", target,
                   str(theirs.fileno()), json.dumps(config)]
        try:
            self.process = subprocess.Popen(command, pass_fds=(theirs.fileno(),),
                                            stdin=subprocess.DEVNULL, env=env,
                                            process_group=0, close_fds=True)
        finally:
            theirs.close()
        self.pid = self.process.pid
        self.conn = Connection(ours.detach())
        self._pidfd = None
        if hasattr(os, "pidfd_open"):
            try:
                self._pidfd = os.pidfd_open(self.pid)
            except OSError:
                self._pidfd = None
        self._mark_wall = self._mark_wait = 0.0
        self.mark()

    # -- the channel ---------------------------------------------------------------------------
    def send(self, obj) -> None:
        import pickle

        self.conn.send_bytes(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))

    def recv(self):
        """The next message (:func:`safe_loads`); ``EOFError`` when the guest is gone."""
        return safe_loads(self.conn.recv_bytes(MAX_MESSAGE))

    def poll(self) -> bool:
        return self.conn.poll()

    @property
    def waitables(self) -> list:
        """What :func:`multiprocessing.connection.wait` can wait on: the channel, and the
        process's end where the system gives a handle for it."""
        return [self.conn] + ([self._pidfd] if self._pidfd is not None else [])

    # -- the process ---------------------------------------------------------------------------
    def alive(self) -> bool:
        return self.process.poll() is None

    @property
    def exitcode(self) -> int | None:
        return self.process.poll()

    def stopped(self) -> bool:
        """Whether the process is stopped (SIGSTOP, a debugger)."""
        st = _proc_stat(self.pid)
        return st is not None and st[0] in ("T", "t")

    def _wait_seconds(self) -> float:
        """Seconds the process's main thread has waited for a CPU (``/proc/PID/schedstat``;
        0 where unknown)."""
        try:
            with open(f"/proc/{self.pid}/schedstat", "rb") as f:
                return int(f.read().split()[1]) / 1e9
        except (OSError, ValueError, IndexError):
            return 0.0

    def mark(self) -> None:
        """A sign of progress came: :meth:`own_seconds` counts from now."""
        import time

        self._mark_wall, self._mark_wait = time.monotonic(), self._wait_seconds()

    def own_seconds(self) -> float:
        """Seconds since :meth:`mark` that were the process's own: wall time less the time
        it spent ready to run while other processes held every CPU (a loaded machine slows
        a guest down; it does not make it hang). A stopped or sleeping process counts in
        full."""
        import time

        wall = time.monotonic() - self._mark_wall
        return max(0.0, wall - max(0.0, self._wait_seconds() - self._mark_wait))

    def kill(self) -> None:
        """End the process and every process it started (its group, and its descendants
        however they detached), then reap it."""
        import signal

        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGSTOP)  # it starts nothing more while we look
        for _ in range(20):
            found = _descendants(self.pid)
            if not found:
                break
            for pid in found:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.killpg(self.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            self.process.wait(10)
        self.close()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.close()
        if self._pidfd is not None:
            with contextlib.suppress(OSError):
                os.close(self._pidfd)
            self._pidfd = None
