"""Logs: frozen dataclasses of read-only numpy arrays (data containers only).

Evaluators may import this module and nothing else from ``simulator``. Field names follow
Open Bandit Pipeline (``n_rounds``, ``n_actions``, ``context``, ``action``, ``reward``,
``pscore``); :meth:`BanditLog.to_obp` / :meth:`BanditLog.from_obp` convert to and from its
``bandit_feedback`` dict. ``save`` / ``load`` use ``.npz`` without pickle.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import scipy.sparse as sp

from simulator._log_frame import DEFAULT_COLUMNS, MAX_CATEGORIES, LogFrameError
from simulator._log_frame import from_frame as _from_frame
from simulator._log_frame import microseconds as microseconds  # the loaders' one date rule
from simulator._log_io import (
    _FORMAT_VERSION,
    LogFormatError,
    _atomic_savez,
    _check_int_array,
    _frozen,
    _header_int,
    _header_metadata,
    _metadata,
    _open_npz,
    _read_arrays,
)

__all__ = ["BanditLog", "InteractionLog", "SOURCES", "LogFormatError", "LogFrameError",
           "DEFAULT_COLUMNS"]

#: Codes of the ``source`` column of an :class:`InteractionLog`.
SOURCES = ("organic", "recommended", "campaign")

@dataclass(frozen=True, eq=False)
class BanditLog:
    """A logged bandit dataset: one record per round.

    Parameters
    ----------
    context : array (n_rounds, dim_context) float
        Context (features) shown to the logging policy.
    action : array (n_rounds,) int
        Logged action, in ``[0, n_actions)``.
    reward : array (n_rounds,) float
        Observed reward of the logged action.
    pscore : array (n_rounds,) float
        Propensity of the logged action under the logging policy, in (0, 1].
    n_actions : int
        Number of actions (arms).
    available : array (n_rounds, n_actions) bool, optional
        Which actions could be chosen at each round (``None``: all of them).
    tick : array (n_rounds,) int, optional
        Time of each record.
    user : array (n_rounds,) int, optional
        User of each record.
    metadata : mapping, optional
        JSON-serialisable provenance (config hash, seed, recloop version, ...).
    action_embeddings : array (n_actions, n_embedding_features) int, optional
        A discrete embedding of every action (OBP's ``action_context``), for estimators
        that weight embeddings instead of actions (``evaluators.mips``).
    pi_b : array (n_rounds, n_actions) float, optional
        The logging policy's action probabilities on each record (OBP's ``pi_b``), at the
        record's position when the log has several; its entry at the logged action must
        equal ``pscore``.
    position : array (n_rounds,) int, optional
        The slot of a recommendation list in which the logged action was shown, in
        ``[0, len_list)`` (OBP's ``position``; the Open Bandit Dataset shows 3 items per
        impression). ``None``: every record at position 0. ``pscore`` is then the
        probability of the logged action *at that position*.
    len_list : int >= 1, optional
        Number of positions (OBP's ``len_list``). Default: ``max(position) + 1``, or 1
        without ``position``.

    Raises
    ------
    ValueError
        On unequal lengths, propensities outside (0, 1], actions out of range or logged
        while unavailable, non-finite contexts or rewards, embeddings that are not
        non-negative integers of shape (n_actions, F), a ``pi_b`` that is not a distribution
        or disagrees with ``pscore``, positions outside ``[0, len_list)``.
    """

    context: np.ndarray
    action: np.ndarray
    reward: np.ndarray
    pscore: np.ndarray
    n_actions: int
    available: np.ndarray | None = None
    tick: np.ndarray | None = None
    user: np.ndarray | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    action_embeddings: np.ndarray | None = None
    pi_b: np.ndarray | None = None
    position: np.ndarray | None = None
    len_list: int | None = None

    def __post_init__(self):
        if isinstance(self.n_actions, bool) or not isinstance(self.n_actions, (int, np.integer)):
            raise TypeError(f"`n_actions` must be an int; got {type(self.n_actions).__name__}.")
        if self.n_actions < 1:
            raise ValueError(f"`n_actions` must be >= 1; got {self.n_actions}.")
        object.__setattr__(self, "n_actions", int(self.n_actions))
        context = np.asarray(self.context)
        if context.ndim == 1:
            context = context[:, None]
        set_ = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731
        for name in ("context", "reward", "pscore"):
            kind = np.asarray(getattr(self, name) if name != "context" else context).dtype.kind
            if kind not in "biuf":  # "0.5" as text would be converted silently by numpy
                raise TypeError(f"`{name}` must hold real numbers; got an array of dtype "
                                f"{np.asarray(getattr(self, name)).dtype} (convert text "
                                "to numbers first).")
        set_("context", _frozen(context, np.float64, "context", 2))
        _check_int_array(self.action, "action")
        set_("action", _frozen(self.action, np.int64, "action", 1))
        set_("reward", _frozen(self.reward, np.float64, "reward", 1))
        set_("pscore", _frozen(self.pscore, np.float64, "pscore", 1))
        n = self.action.shape[0]
        for name in ("context", "reward", "pscore"):
            if getattr(self, name).shape[0] != n:
                raise ValueError(
                    f"`{name}` has {getattr(self, name).shape[0]} rows but `action` has {n}; "
                    "all arrays must have one row per round."
                )
        if not np.all(np.isfinite(self.context)):
            raise ValueError("`context` must be finite; got nan or inf.")
        if not np.all(np.isfinite(self.reward)):
            bad = int(np.flatnonzero(~np.isfinite(self.reward))[0])
            raise ValueError(f"`reward` must be finite; got {self.reward[bad]} at index {bad}.")
        bad = np.flatnonzero(~((self.pscore > 0) & (self.pscore <= 1)))
        if bad.size:
            raise ValueError(
                f"`pscore` must be in (0, 1]; got {self.pscore[bad[0]]} at index {bad[0]}."
            )
        bad = np.flatnonzero((self.action < 0) | (self.action >= self.n_actions))
        if bad.size:
            raise ValueError(
                f"`action` must be in [0, {self.n_actions}); got {self.action[bad[0]]} "
                f"at index {bad[0]}."
            )
        if self.available is not None:
            set_("available", _frozen(self.available, np.bool_, "available", 2))
            if self.available.shape != (n, self.n_actions):
                raise ValueError(
                    f"`available` must have shape (n_rounds, n_actions) = ({n}, "
                    f"{self.n_actions}); got {self.available.shape}."
                )
            bad = np.flatnonzero(~self.available[np.arange(n), self.action])
            if bad.size:
                raise ValueError(
                    f"`action` {self.action[bad[0]]} at index {bad[0]} was not available."
                )
        for name in ("tick", "user"):
            value = getattr(self, name)
            if value is not None:
                _check_int_array(value, name)
                arr = _frozen(value, np.int64, name, 1)
                if arr.shape[0] != n:
                    raise ValueError(f"`{name}` must have {n} entries; got {arr.shape[0]}.")
                set_(name, arr)
        set_("metadata", _metadata(self.metadata))
        if self.action_embeddings is not None:
            emb = np.asarray(self.action_embeddings)
            if emb.size and emb.dtype.kind not in "iu":
                raise TypeError(f"`action_embeddings` must hold integers; got dtype {emb.dtype}.")
            if emb.ndim == 1:
                emb = emb[:, None]
            if emb.ndim != 2 or emb.shape[0] != self.n_actions:
                raise ValueError(f"`action_embeddings` must have shape (n_actions, "
                                 f"n_embedding_features) = ({self.n_actions}, F); got "
                                 f"{np.shape(self.action_embeddings)}.")
            if emb.size and emb.min() < 0:
                raise ValueError(f"`action_embeddings` must be >= 0; got {int(emb.min())}.")
            set_("action_embeddings", _frozen(emb, np.int64, "action_embeddings", 2))
        if self.pi_b is not None:
            pb = np.asarray(self.pi_b, dtype=np.float64)
            if pb.ndim == 3 and pb.shape[2] == 1:
                pb = pb[:, :, 0]
            if pb.shape != (n, self.n_actions):
                raise ValueError(f"`pi_b` must have shape (n_rounds, n_actions) = ({n}, "
                                 f"{self.n_actions}); got {np.shape(self.pi_b)}.")
            if pb.size:
                ok = np.isfinite(pb).all(axis=1) & (pb >= 0).all(axis=1) & (
                    np.abs(pb.sum(axis=1) - 1) <= 1e-6)
                if not ok.all():
                    j = int(np.flatnonzero(~ok)[0])
                    raise ValueError(f"`pi_b` rows must be probabilities summing to 1; got "
                                     f"{pb[j].tolist()[:8]} at record {j}.")
                got = pb[np.arange(n), self.action]
                bad = np.flatnonzero(np.abs(got - self.pscore) > 1e-9)
                if bad.size:
                    j = int(bad[0])
                    raise ValueError(f"`pi_b` at the logged action must equal `pscore`; got "
                                     f"{got[j]} against {self.pscore[j]} at record {j}.")
            set_("pi_b", _frozen(pb, np.float64, "pi_b", 2))
        self._check_positions(n)

    def _check_positions(self, n: int) -> None:
        len_list = self.len_list
        if self.position is not None:
            _check_int_array(self.position, "position")
            pos = _frozen(self.position, np.int64, "position", 1)
            if pos.shape[0] != n:
                raise ValueError(f"`position` must have {n} entries; got {pos.shape[0]}.")
            object.__setattr__(self, "position", pos)
            if len_list is None:
                len_list = int(pos.max()) + 1 if n and pos.max() > 0 else 1
        if len_list is None:
            len_list = 1
        if isinstance(len_list, bool) or not isinstance(len_list, (int, np.integer)):
            raise TypeError(f"`len_list` must be an int; got {type(len_list).__name__}.")
        if len_list < 1:
            raise ValueError(f"`len_list` must be >= 1; got {len_list}.")
        object.__setattr__(self, "len_list", int(len_list))
        if self.position is not None:
            bad = np.flatnonzero((self.position < 0) | (self.position >= len_list))
            if bad.size:
                raise ValueError(f"`position` must be in [0, {len_list}) (`len_list` = "
                                 f"{len_list}); got {self.position[bad[0]]} at index "
                                 f"{bad[0]}.")

    # -- shape ---------------------------------------------------------------------------
    @property
    def n_rounds(self) -> int:
        return int(self.action.shape[0])

    @property
    def dim_context(self) -> int:
        return int(self.context.shape[1])

    def __len__(self) -> int:
        return self.n_rounds

    def available_mask(self) -> np.ndarray:
        """``available`` as an array, all-True when the log has none."""
        if self.available is not None:
            return self.available
        mask = np.ones((self.n_rounds, self.n_actions), dtype=bool)
        mask.setflags(write=False)
        return mask

    def positions(self) -> np.ndarray:
        """``position`` as an array, all 0 (a read-only view) when the log has none."""
        if self.position is not None:
            return self.position
        return np.broadcast_to(np.zeros(1, dtype=np.int64), (self.n_rounds,))

    def observation(self, j: int) -> dict:
        """The observation a bandit agent receives for record ``j``."""
        avail = self.available[j] if self.available is not None else np.ones(self.n_actions, bool)
        obs = {"context": self.context[j], "available": avail}
        if self.position is not None:
            obs["position"] = int(self.position[j])
        if self.tick is not None:
            obs["tick"] = int(self.tick[j])
        if self.user is not None:
            obs["user"] = int(self.user[j])
        return obs

    def take(self, index) -> "BanditLog":
        """A new log of the records at ``index`` (in that order; repeats allowed)."""
        index = np.asarray(index, dtype=np.int64)
        opt = lambda a: None if a is None else a[index]  # noqa: E731
        return BanditLog(
            context=self.context[index], action=self.action[index], reward=self.reward[index],
            pscore=self.pscore[index], n_actions=self.n_actions, available=opt(self.available),
            tick=opt(self.tick), user=opt(self.user), metadata=self.metadata,
            action_embeddings=self.action_embeddings, pi_b=opt(self.pi_b),
            position=opt(self.position), len_list=self.len_list,
        )

    # -- Open Bandit Pipeline ------------------------------------------------------------
    def to_obp(self, *, expected_reward: np.ndarray | None = None) -> dict:
        """Open Bandit Pipeline's ``bandit_feedback`` dict (arrays are copies).

        ``action_context`` is the log's ``action_embeddings`` when it has them (OBP's MIPS
        reads the logged action's embedding as ``action_context[action]``), the identity
        otherwise; ``pi_b`` is added as ``(n_rounds, n_actions, 1)`` when the log has it and
        one position (with several, the log holds ``pi_b`` at each record's position only,
        which is not OBP's ``(n_rounds, n_actions, len_list)``: it is left out).
        ``position`` (all 0 without positions) and ``len_list`` are always there.

        ``expected_reward`` (n_rounds, n_actions), the simulator's ground truth, may be added
        for OBP's synthetic-data tools; recloop's estimators never read it.
        """
        fb = {
            "n_rounds": self.n_rounds,
            "n_actions": self.n_actions,
            "context": self.context.copy(),
            "action": self.action.copy(),
            "position": np.array(self.positions(), dtype=np.int64),
            "len_list": self.len_list,
            "reward": self.reward.copy(),
            "pscore": self.pscore.copy(),
            "action_context": (np.eye(self.n_actions) if self.action_embeddings is None
                               else self.action_embeddings.copy()),
        }
        if self.pi_b is not None and self.len_list == 1:
            fb["pi_b"] = self.pi_b[:, :, None].copy()
        if expected_reward is not None:
            er = np.asarray(expected_reward, dtype=np.float64)
            if er.shape != (self.n_rounds, self.n_actions):
                raise ValueError(
                    f"`expected_reward` must have shape ({self.n_rounds}, {self.n_actions}); "
                    f"got {er.shape}."
                )
            fb["expected_reward"] = er.copy()
        if self.available is not None:
            fb["available"] = self.available.copy()
        if self.tick is not None:
            fb["tick"] = self.tick.copy()
        if self.user is not None:
            fb["user"] = self.user.copy()
        return fb

    @classmethod
    def from_obp(cls, bandit_feedback: Mapping[str, Any]) -> "BanditLog":
        """Build a log from Open Bandit Pipeline's ``bandit_feedback`` dict.

        An integer ``action_context`` other than the identity becomes ``action_embeddings``;
        ``pi_b`` is kept when present (of shape ``(n_rounds, n_actions, len_list)``, it is
        read at each record's position). ``position`` (OBP's 0-based slots; ``None`` or all
        0: one slot) becomes the log's ``position``; ``len_list`` is the dict's own when it
        has one, ``max(position) + 1`` otherwise (as OBP's ``OpenBanditDataset.len_list``).
        """
        if not isinstance(bandit_feedback, Mapping):
            raise TypeError(
                f"`bandit_feedback` must be a dict; got {type(bandit_feedback).__name__}."
            )
        missing = [k for k in ("n_actions", "context", "action", "reward", "pscore")
                   if k not in bandit_feedback]
        if missing:
            raise ValueError(f"`bandit_feedback` lacks the key(s) {', '.join(missing)}.")
        pos, len_list = bandit_feedback.get("position"), bandit_feedback.get("len_list")
        if pos is not None:
            pos = np.asarray(pos)
            if pos.ndim != 1 or pos.shape[0] != np.shape(bandit_feedback["action"])[0]:
                raise ValueError(f"`bandit_feedback['position']` must have one entry per "
                                 f"round; got shape {pos.shape}.")
            if not pos.any() and len_list in (None, 1):
                pos = None  # one slot: the log has no positions
        K = int(bandit_feedback["n_actions"])
        emb = bandit_feedback.get("action_context")
        if emb is not None:
            emb = np.asarray(emb)
            # the identity is OBP's "no embedding"; float embeddings are not discrete ones
            if emb.dtype.kind not in "iu" or (emb.shape == (K, K)
                                             and np.array_equal(emb, np.eye(K))):
                emb = None
        return cls(
            context=bandit_feedback["context"], action=bandit_feedback["action"],
            reward=bandit_feedback["reward"], pscore=bandit_feedback["pscore"],
            n_actions=K,
            available=bandit_feedback.get("available"), tick=bandit_feedback.get("tick"),
            user=bandit_feedback.get("user"), action_embeddings=emb,
            pi_b=cls._pi_b_at_position(bandit_feedback.get("pi_b"), pos),
            position=pos, len_list=len_list,
        )

    @staticmethod
    def _pi_b_at_position(pi_b, pos):
        """OBP's ``(n_rounds, n_actions, len_list)`` ``pi_b`` read at each record's slot."""
        if pi_b is None:
            return None
        pi_b = np.asarray(pi_b)
        if pi_b.ndim != 3 or pi_b.shape[2] == 1:
            return pi_b
        p = np.zeros(pi_b.shape[0], dtype=np.int64) if pos is None else pos.astype(np.int64)
        if p.shape[0] != pi_b.shape[0] or p.min(initial=0) < 0 or p.max(
                initial=0) >= pi_b.shape[2]:
            raise ValueError(f"`bandit_feedback['pi_b']` of shape {pi_b.shape} cannot be read "
                             "at the records' positions (one row per round, len_list > "
                             "every position).")
        return pi_b[np.arange(pi_b.shape[0]), :, p]

    # -- tables --------------------------------------------------------------------------
    @classmethod
    def from_frame(cls, frame, *, action=None, reward=None, pscore=None, context=None,
                   position=None, tick=None, actions=None, first_position="auto",
                   len_list=None, max_categories=MAX_CATEGORIES,
                   metadata=None) -> "BanditLog":
        """Build a log from a table (a pandas DataFrame): one record per row, in row order.

        Parameters
        ----------
        frame : pandas.DataFrame
            One row per logged round. Column names must be unique.
        action, reward, pscore : str, optional
            The columns of the logged action, its reward and its propensity (the logging
            policy's probability of that action, in (0, 1]). Default: the first present of
            :data:`DEFAULT_COLUMNS` -- ``action``/``item_id``/``arm``,
            ``reward``/``click``, ``pscore``/``propensity_score``/``propensity`` (the plain
            names, then the Open Bandit Dataset's).
        context : list of str, str or None
            The context columns: a list of names, or a str prefix (every column whose name
            starts with it). Default: every column that plays no other role, except an
            unnamed index column (``""``, ``Unnamed: 0``). Numeric columns are used as they
            are; text columns are one-hot encoded with their first sorted category dropped
            (``pandas.get_dummies(drop_first=True)``, as the Open Bandit loader), named
            ``"column=value"`` in ``metadata["context_columns"]``.
        position : str or False, optional
            The column of the slot in which the action was shown. Default: ``position`` or
            ``slot`` when present; ``False``: none (one slot).
        tick : str or False, optional
            A time column (integers, or ISO 8601 dates stored as microseconds since 1970
            UTC). Default: ``timestamp``, ``tick`` or ``time`` when present; it is never
            context.
        actions : sequence, optional
            Every action id, in the order of the log's action indices (ids the log never
            shows may be included: a policy may give them mass). Default: the distinct
            logged ids in increasing order.
        first_position : 0, 1 or "auto"
            The id of the first slot; ``"auto"``: 1 when no record has position 0 (the Open
            Bandit Dataset's 1-3, left to right), else 0.
        len_list : int, optional
            Number of slots; default the largest slot + 1. A list of distinct actions has at
            most ``n_actions`` slots.
        max_categories : int, default 1000
            Text context columns with more distinct values are refused (a free-text or id
            column would become thousands of one-hot columns).
        metadata : mapping, optional
            Added to the log's ``metadata``.

        Returns
        -------
        BanditLog
            ``action`` indexes ``metadata["actions"]`` (the user's ids: ints or str), the
            slots ``metadata["positions"]`` (the user's position ids) when the table has
            positions, ``metadata["columns"]`` names the column of each role and
            ``metadata["context_columns"]`` each context column: the encoding a target policy
            in the user's own ids is read with (``evaluators.datasets.read_target``).

        Raises
        ------
        LogFrameError
            (a ``ValueError``) naming the column and the row: a missing column (with the
            nearest name), a column named twice, non-numeric, missing or infinite rewards or
            propensities (text such as ``"0.5"`` included: convert it first), propensities
            outside (0, 1], positions that are not integers or out of range, a text context
            column with too many values, dates out of range.
        TypeError, ValueError
            Bad arguments (named).

        Examples
        --------
        >>> import pandas as pd
        >>> df = pd.DataFrame({"item_id": ["b", "a", "b"], "click": [1, 0, 0],
        ...                    "propensity_score": [0.5, 0.5, 0.5], "age": [31, 45, 27]})
        >>> log = BanditLog.from_frame(df)
        >>> log.action.tolist(), log.metadata["actions"], log.metadata["context_columns"]
        ([1, 0, 1], ['a', 'b'], ['age'])
        """
        return _from_frame(cls, frame, action=action, reward=reward, pscore=pscore,
                           context=context, position=position, tick=tick, actions=actions,
                           first_position=first_position, len_list=len_list,
                           max_categories=max_categories, metadata=metadata)

    def __reduce__(self):
        """Pickled as its constructor's arguments (``metadata`` as a dict): a log sent to
        another process (a guest) arrives whole, checked again and read-only."""
        kw = {f.name: getattr(self, f.name) for f in fields(self)}
        kw["metadata"] = dict(self.metadata)
        return (_bandit_log, (kw,))

    # -- files ---------------------------------------------------------------------------
    def save(self, path) -> Path:
        """Write the log to ``path`` (``.npz``, no pickle, atomic); returns the path written."""
        arrays = {f.name: getattr(self, f.name) for f in fields(self)
                  if f.name not in ("n_actions", "metadata", "len_list")
                  and getattr(self, f.name) is not None}
        header = {"kind": "BanditLog", "format": _FORMAT_VERSION, "n_actions": self.n_actions,
                  "metadata": dict(self.metadata)}
        if self.len_list != 1:  # a one-slot log's file stays as it was before positions
            header["len_list"] = self.len_list
        arrays["__header__"] = np.array(json.dumps(header))
        return _atomic_savez(path, arrays)

    @classmethod
    def load(cls, path) -> "BanditLog":
        """Read a log written by :meth:`save`.

        Raises
        ------
        FileNotFoundError
            No such file.
        LogFormatError
            (a ``ValueError``) Anything else wrong with the file, named: not an ``.npz``
            archive, a header that is not one JSON object of kind ``BanditLog`` with an int
            ``n_actions``, missing or unexpected arrays, object or non-numeric arrays, or
            arrays that do not make a valid log.
        """
        data, header = _open_npz(path, "BanditLog")
        with data:
            kw = _read_arrays(data, path, ("context", "action", "reward", "pscore"),
                              ("available", "tick", "user", "action_embeddings", "pi_b",
                               "position"))
        n_actions = _header_int(header, "n_actions", path)
        len_list = _header_int(header, "len_list", path) if "len_list" in header else 1
        meta = _header_metadata(header, path)
        try:
            return cls(n_actions=n_actions, metadata=meta, len_list=len_list, **kw)
        except (TypeError, ValueError) as exc:
            raise LogFormatError(f"{path}: the arrays do not make a valid BanditLog: "
                                 f"{exc}") from None


def _bandit_log(kw: dict) -> BanditLog:
    return BanditLog(**kw)


@dataclass(frozen=True, eq=False)
class InteractionLog:
    """Edges of the profile graph: user ``user[e]`` got item ``item[e]`` at ``tick[e]``.

    ``source[e]`` indexes :data:`SOURCES` (0 organic, 1 recommended, 2 campaign);
    ``rating[e]``, when the log has ratings (a calibrated world's, or a real log's), is the
    rating the user gave the item (``None``: no ratings).
    """

    user: np.ndarray
    item: np.ndarray
    tick: np.ndarray
    source: np.ndarray
    n_users: int
    n_items: int
    metadata: Mapping[str, Any] = field(default_factory=dict)
    rating: np.ndarray | None = None

    def __post_init__(self):
        for name in ("n_users", "n_items"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
                raise ValueError(f"`{name}` must be an int >= 0; got {v!r}.")
            object.__setattr__(self, name, int(v))
        for name, dtype in (("user", np.int64), ("item", np.int64), ("tick", np.int64),
                            ("source", np.int8)):
            _check_int_array(getattr(self, name), name)
            object.__setattr__(self, name, _frozen(getattr(self, name), dtype, name, 1))
        n = self.user.shape[0]
        if self.rating is not None:
            r = np.asarray(self.rating)
            if r.size and not (np.issubdtype(r.dtype, np.floating)
                               or np.issubdtype(r.dtype, np.integer)):
                raise TypeError(f"`rating` must hold real numbers; got dtype {r.dtype}.")
            object.__setattr__(self, "rating", _frozen(r, np.float64, "rating", 1))
            bad = np.flatnonzero(~np.isfinite(self.rating))
            if bad.size:
                raise ValueError(f"`rating` must be finite; got {self.rating[bad[0]]} at "
                                 f"index {bad[0]}.")
        for name in ("item", "tick", "source") + (("rating",) if self.rating is not None
                                                   else ()):
            if getattr(self, name).shape[0] != n:
                raise ValueError(f"`{name}` must have {n} entries like `user`; "
                                 f"got {getattr(self, name).shape[0]}.")
        for name, hi in (("user", self.n_users), ("item", self.n_items), ("source", len(SOURCES))):
            a = getattr(self, name)
            bad = np.flatnonzero((a < 0) | (a >= hi))
            if bad.size:
                raise ValueError(f"`{name}` must be in [0, {hi}); got {a[bad[0]]} "
                                 f"at index {bad[0]}.")
        object.__setattr__(self, "metadata", _metadata(self.metadata))

    def __len__(self) -> int:
        return int(self.user.shape[0])

    def profiles(self, t: int | None = None, *, sources=None) -> sp.csr_matrix:
        """Binary users x items CSR matrix of the edges with ``tick <= t`` (all when ``None``)."""
        keep = np.ones(len(self), dtype=bool)
        if t is not None:
            keep &= self.tick <= t
        if sources is not None:
            codes = [SOURCES.index(s) for s in sources]
            keep &= np.isin(self.source, codes)
        m = sp.csr_matrix(
            (np.ones(int(keep.sum())), (self.user[keep], self.item[keep])),
            shape=(self.n_users, self.n_items),
        )
        m.sum_duplicates()
        m.data[:] = 1.0
        return m

    def save(self, path) -> Path:
        """Write the log to ``path`` (``.npz``, no pickle, atomic)."""
        header = {"kind": "InteractionLog", "format": _FORMAT_VERSION, "n_users": self.n_users,
                  "n_items": self.n_items, "metadata": dict(self.metadata)}
        arrays = {"user": self.user, "item": self.item, "tick": self.tick,
                  "source": self.source, "__header__": np.array(json.dumps(header))}
        if self.rating is not None:
            arrays["rating"] = self.rating
        return _atomic_savez(path, arrays)

    @classmethod
    def load(cls, path) -> "InteractionLog":
        """Read a log written by :meth:`save` (``LogFormatError`` on a malformed file)."""
        data, header = _open_npz(path, "InteractionLog")
        with data:
            kw = _read_arrays(data, path, ("user", "item", "tick", "source"), ("rating",))
        n_users = _header_int(header, "n_users", path)
        n_items = _header_int(header, "n_items", path)
        meta = _header_metadata(header, path)
        try:
            return cls(n_users=n_users, n_items=n_items, metadata=meta, **kw)
        except (TypeError, ValueError) as exc:
            raise LogFormatError(f"{path}: the arrays do not make a valid InteractionLog: "
                                 f"{exc}") from None


from simulator._slate_log import SlateLog  # noqa: E402,F401  (slates: simulator/_slate_log.py)
