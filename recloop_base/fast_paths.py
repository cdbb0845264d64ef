"""When may an evaluator trust an agent's fast path (``replay_arrays``, ``batch``)?

recloop's bandits offer compiled shortcuts beside their ``act`` / ``update`` protocol: a
``replay_arrays`` method that replays a whole log in one compiled call, and a ``batch``
classmethod that builds a batched twin stepping B copies in lockstep. A shortcut is only
worth taking if it does what ``act`` / ``update`` do. Finding it by ``hasattr`` is not enough:
a subclass that overrides ``act`` inherits its parent's shortcut, which then silently
computes the parent's numbers (issue 18). :func:`fast_path` takes a shortcut only when it
provably implements the agent's behaviour:

* the class that *vouches* for the shortcut is the nearest class of the agent's MRO that
  either defines it (in its own ``__dict__``) or is registered for it with
  :func:`register_fast_path` (recloop's bandits register themselves: their shortcut lives
  on a shared base class, their ``act`` on the concrete class);
* the behaviour methods (``act`` and ``update``) must not be overridden below that class.

A subclass that only adds attributes or overrides unrelated methods keeps the shortcut; one
that overrides ``act`` or ``update`` gets the plain loop, with the numbers of its own
methods. An attribute set to ``None`` opts out. This module imports nothing of recloop's
other packages, so that ``simulator``, ``agents`` and ``evaluators`` all use the one rule.
"""

from __future__ import annotations

__all__ = ["BEHAVIOUR", "fast_path", "register_fast_path", "why_no_fast_path"]

#: The methods a fast path stands in for.
BEHAVIOUR = ("act", "update")

_REGISTRY_ATTR = "_recloop_fast_paths_"


def register_fast_path(cls: type, *names: str) -> type:
    """Vouch that the fast paths ``names`` implement ``cls``'s ``act`` / ``update``.

    Needed only when the fast path is defined on an ancestor of ``cls`` while ``act`` or
    ``update`` is defined on ``cls`` itself (recloop's bandits: ``replay_arrays`` lives on a
    shared base class). The registration covers ``cls`` exactly and its subclasses as long as
    they do not override ``act`` / ``update`` again; it is stored on ``cls`` (not inherited
    by subclasses as a registration of their own).

    Parameters
    ----------
    cls : type
        The agent class.
    *names : str
        Fast-path attributes, e.g. ``"replay_arrays"``, ``"batch"``.

    Returns
    -------
    type
        ``cls`` (usable as a decorator through ``functools.partial``).

    Raises
    ------
    TypeError
        ``cls`` is not a class or a name is not a string.
    """
    if not isinstance(cls, type):
        raise TypeError(f"`cls` must be a class; got {type(cls).__name__}.")
    for n in names:
        if not isinstance(n, str):
            raise TypeError(f"`names` must be strings; got {type(n).__name__} {n!r}.")
    own = cls.__dict__.get(_REGISTRY_ATTR, frozenset())
    setattr(cls, _REGISTRY_ATTR, frozenset(own) | frozenset(names))
    return cls


def _registered(cls: type, name: str) -> bool:
    return name in cls.__dict__.get(_REGISTRY_ATTR, ())


def _definer(mro, name):
    """Index in ``mro`` of the class defining ``name`` in its own namespace (None: none)."""
    for i, c in enumerate(mro):
        if name in c.__dict__:
            return i
    return None


def why_no_fast_path(obj, name: str, *, behaviour=BEHAVIOUR) -> str | None:
    """Why ``fast_path(obj, name)`` is ``None``, in one sentence (``None`` if it is not).

    Parameters
    ----------
    obj : object or class
        An agent (or its class, for a classmethod such as ``batch``).
    name : str
        The fast-path attribute.
    behaviour : tuple of str
        The methods the fast path stands in for (default ``("act", "update")``).
    """
    cls = obj if isinstance(obj, type) else type(obj)
    mro = cls.__mro__
    vouch = next((i for i, c in enumerate(mro) if name in c.__dict__ or _registered(c, name)),
                 None)
    if vouch is None:
        return f"{cls.__name__} has no `{name}`."
    attr = getattr(obj, name, None)
    if not callable(attr):
        return f"{cls.__name__}.{name} is {attr!r}, not a callable."
    for m in behaviour:
        where = _definer(mro, m)
        if where is None:
            return f"{cls.__name__} defines no `{m}` method in its class."
        if where < vouch:
            return (f"{mro[where].__name__} overrides `{m}` below {mro[vouch].__name__}, "
                    f"whose `{name}` implements {mro[vouch].__name__}.{m}, not "
                    f"{mro[where].__name__}.{m}.")
    return None


def fast_path(obj, name: str, *, behaviour=BEHAVIOUR):
    """The fast path ``name`` of ``obj`` if it provably implements its behaviour, else None.

    Parameters
    ----------
    obj : object or class
        An agent (or its class, for a classmethod such as ``batch``).
    name : str
        The fast-path attribute, e.g. ``"replay_arrays"`` or ``"batch"``.
    behaviour : tuple of str
        The methods the fast path stands in for (default ``("act", "update")``).

    Returns
    -------
    callable or None
        ``getattr(obj, name)`` when the nearest class of ``obj``'s MRO that defines ``name``
        or is registered for it (:func:`register_fast_path`) is not below the classes
        defining the ``behaviour`` methods; ``None`` otherwise (the caller then runs the
        plain ``act`` / ``update`` loop). :func:`why_no_fast_path` says why.

    Notes
    -----
    Issue 18: a subclass of ``UCB1`` overriding ``act`` inherited ``UCB1``'s compiled
    ``replay_arrays``, so replay returned ``UCB1``'s value for it. The MRO rule refuses that
    shortcut and keeps it for subclasses that leave ``act`` / ``update`` alone.

    Examples
    --------
    >>> class Base:
    ...     def act(self, obs): return 0
    ...     def update(self, obs, a, r): pass
    ...     def replay_arrays(self, *args): return "fast"
    >>> class Tagged(Base):
    ...     label = "only an attribute"
    >>> class Other(Base):
    ...     def act(self, obs): return 1
    >>> fast_path(Tagged(), "replay_arrays")(), fast_path(Other(), "replay_arrays")
    ('fast', None)
    """
    if why_no_fast_path(obj, name, behaviour=behaviour) is not None:
        return None
    return getattr(obj, name)
