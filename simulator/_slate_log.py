"""``SlateLog``: logged slates with per-position clicks and exact logging propensities.

A data container like :class:`simulator.logs.BanditLog` (re-exported from
``simulator.logs``, the one module of ``simulator`` that evaluators may import). Field names
follow Open Bandit Pipeline's slate feedback: ``action`` (the items of each position),
``reward`` (slot-level rewards), ``pscore`` (the logging policy's probability of the whole
slate), ``pscore_cascade`` (of each prefix ``s_0 .. s_j``) and ``pscore_item_position``
(of the item at its position); recloop keeps them as (n_rounds, len_list) arrays where OBP
flattens them to (n_rounds * len_list,) with ``slate_id`` and ``position``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from simulator._log_io import (
    _FORMAT_VERSION,
    LogFormatError,
    _atomic_savez,
    _check_int_array,
    _frozen,
    _metadata,
    _open_npz,
)

__all__ = ["SlateLog", "SLATE_REWARD_TYPES"]

#: How a slate's reward aggregates its positions: the number of clicks or any click.
SLATE_REWARD_TYPES = ("clicks", "any_click")
_CONSISTENCY = 1e-9  # relative tolerance between pscore and the last pscore_cascade


def _probabilities(arr: np.ndarray, name: str) -> None:
    bad = np.flatnonzero(~((arr > 0) & (arr <= 1)).ravel())
    if bad.size:
        j = int(bad[0])
        where = f"index {j}" if arr.ndim == 1 else f"record {j // arr.shape[1]}, position " \
            f"{j % arr.shape[1]}"
        raise ValueError(f"`{name}` must be in (0, 1]; got {arr.ravel()[j]} at {where}.")


@dataclass(frozen=True, eq=False)
class SlateLog:
    """A logged slate dataset: one record per slate shown.

    Parameters
    ----------
    context : array (n_rounds, dim_context) float
        Context of each record (the user's features; 1-d is read as one column).
    action : array (n_rounds, len_list) int
        Item shown at each position, distinct within a slate, in ``[0, n_items)``.
    reward : array (n_rounds, len_list) float
        Reward observed at each position (1.0 for a click).
    pscore : array (n_rounds,) float
        Logging probability of the whole slate ``mu(s | x)``, in (0, 1].
    pscore_cascade : array (n_rounds, len_list) float
        ``mu(s_0 .. s_j | x)``, non-increasing along positions; its last column equals
        ``pscore``.
    pscore_item_position : array (n_rounds, len_list) float
        ``mu(s_j at position j | x)``, the logging policy's position marginal.
    n_items : int
        Number of items (OBP's ``n_unique_action``).
    reward_type : {"clicks", "any_click"}, default "clicks"
        The slate's reward: the sum of the positions' rewards or whether any is positive.
    available, tick, user, metadata
        As in :class:`simulator.logs.BanditLog`: ``available`` (n_rounds, n_items) bool.

    Raises
    ------
    ValueError
        Unequal lengths, a slate with repeated items or items out of range or not available,
        propensities outside (0, 1], ``pscore`` not the last ``pscore_cascade``, a
        ``pscore_cascade`` increasing along positions, non-finite rewards or contexts.
    TypeError
        Non-integer actions, ticks or users; ``n_items`` not an int.
    """

    context: np.ndarray
    action: np.ndarray
    reward: np.ndarray
    pscore: np.ndarray
    pscore_cascade: np.ndarray
    pscore_item_position: np.ndarray
    n_items: int
    reward_type: str = "clicks"
    available: np.ndarray | None = None
    tick: np.ndarray | None = None
    user: np.ndarray | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        set_ = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731
        if isinstance(self.n_items, bool) or not isinstance(self.n_items, (int, np.integer)):
            raise TypeError(f"`n_items` must be an int; got {type(self.n_items).__name__}.")
        if self.n_items < 1:
            raise ValueError(f"`n_items` must be >= 1; got {self.n_items}.")
        set_("n_items", int(self.n_items))
        if self.reward_type not in SLATE_REWARD_TYPES:
            raise ValueError(f"`reward_type` must be one of {SLATE_REWARD_TYPES}; got "
                             f"{self.reward_type!r}.")
        _check_int_array(self.action, "action")
        set_("action", _frozen(self.action, np.int64, "action", 2))
        n, k = self.action.shape
        if k < 1:
            raise ValueError(f"`action` must have at least one position; got shape {(n, k)}.")
        context = np.asarray(self.context)
        if context.ndim == 1:
            context = context[:, None]
        set_("context", _frozen(context, np.float64, "context", 2))
        for name in ("reward", "pscore_cascade", "pscore_item_position"):
            set_(name, _frozen(getattr(self, name), np.float64, name, 2))
            if getattr(self, name).shape != (n, k):
                raise ValueError(f"`{name}` must have shape (n_rounds, len_list) = ({n}, {k}) "
                                 f"like `action`; got {getattr(self, name).shape}.")
        set_("pscore", _frozen(self.pscore, np.float64, "pscore", 1))
        for name in ("context", "pscore"):
            if getattr(self, name).shape[0] != n:
                raise ValueError(f"`{name}` has {getattr(self, name).shape[0]} rows but "
                                 f"`action` has {n}; all arrays must have one row per record.")
        if not np.all(np.isfinite(self.context)):
            raise ValueError("`context` must be finite; got nan or inf.")
        bad = np.flatnonzero(~np.isfinite(self.reward).all(axis=1))
        if bad.size:
            raise ValueError(f"`reward` must be finite; got nan or inf at record {bad[0]}.")
        bad = np.flatnonzero(np.any((self.action < 0) | (self.action >= self.n_items), axis=1))
        if bad.size:
            raise ValueError(f"`action` items must be in [0, {self.n_items}); got "
                             f"{self.action[bad[0]].tolist()} at record {bad[0]}.")
        srt = np.sort(self.action, axis=1)
        bad = np.flatnonzero(np.any(srt[:, 1:] == srt[:, :-1], axis=1))
        if bad.size:
            raise ValueError(f"`action` must hold distinct items in each slate; got "
                             f"{self.action[bad[0]].tolist()} at record {bad[0]}.")
        for name in ("pscore", "pscore_cascade", "pscore_item_position"):
            _probabilities(getattr(self, name), name)
        last = self.pscore_cascade[:, -1]
        bad = np.flatnonzero(np.abs(last - self.pscore) > _CONSISTENCY * self.pscore)
        if bad.size:
            raise ValueError(f"`pscore` must equal the last column of `pscore_cascade` (the "
                             f"whole slate's probability); got {self.pscore[bad[0]]} and "
                             f"{last[bad[0]]} at record {bad[0]}.")
        rise = self.pscore_cascade[:, 1:] > self.pscore_cascade[:, :-1] * (1 + _CONSISTENCY)
        bad = np.flatnonzero(rise.any(axis=1))
        if bad.size:
            raise ValueError(f"`pscore_cascade` must be non-increasing along positions (a "
                             f"prefix is at least as likely as its extensions); got "
                             f"{self.pscore_cascade[bad[0]].tolist()} at record {bad[0]}.")
        if self.available is not None:
            set_("available", _frozen(self.available, np.bool_, "available", 2))
            if self.available.shape != (n, self.n_items):
                raise ValueError(f"`available` must have shape (n_rounds, n_items) = ({n}, "
                                 f"{self.n_items}); got {self.available.shape}.")
            shown = self.available[np.arange(n)[:, None], self.action]
            bad = np.flatnonzero(~shown.all(axis=1))
            if bad.size:
                raise ValueError(f"`action` {self.action[bad[0]].tolist()} at record {bad[0]} "
                                 "holds an item that was not available.")
        for name in ("tick", "user"):
            value = getattr(self, name)
            if value is not None:
                _check_int_array(value, name)
                arr = _frozen(value, np.int64, name, 1)
                if arr.shape[0] != n:
                    raise ValueError(f"`{name}` must have {n} entries; got {arr.shape[0]}.")
                set_(name, arr)
        set_("metadata", _metadata(self.metadata))

    # -- shape ---------------------------------------------------------------------------
    @property
    def n_rounds(self) -> int:
        return int(self.action.shape[0])

    @property
    def len_list(self) -> int:
        """Slate length ``k``."""
        return int(self.action.shape[1])

    @property
    def dim_context(self) -> int:
        return int(self.context.shape[1])

    def __len__(self) -> int:
        return self.n_rounds

    @property
    def slate_reward(self) -> np.ndarray:
        """The reward of each slate (n_rounds,): the sum of its positions' rewards
        (``reward_type="clicks"``) or 1.0 if any is positive (``"any_click"``)."""
        if self.reward_type == "clicks":
            return self.reward.sum(axis=1)
        return (self.reward > 0).any(axis=1).astype(np.float64)

    def available_mask(self) -> np.ndarray:
        """``available`` as an array, all-True when the log has none."""
        if self.available is not None:
            return self.available
        # a read-only view of one True: no n_rounds x n_items allocation per call
        return np.broadcast_to(np.True_, (self.n_rounds, self.n_items))

    def observations(self, index=None) -> dict:
        """The batched observations of records ``index`` (all by default), as a slate policy
        receives them: ``context``, ``available`` and, when logged, ``user`` and ``tick``.

        Feed them to a target policy to get its propensities on the logged slates, e.g.
        ``target.prefix_probabilities(log.observations(), log.action)``.
        """
        index = slice(None) if index is None else np.asarray(index, dtype=np.int64)
        obs = {"context": self.context[index], "available": self.available_mask()[index]}
        if self.user is not None:
            obs["user"] = self.user[index]
        if self.tick is not None:
            obs["tick"] = self.tick[index]
        return obs

    def take(self, index) -> "SlateLog":
        """A new log of the records at ``index`` (in that order; repeats allowed)."""
        index = np.asarray(index, dtype=np.int64)
        opt = lambda a: None if a is None else a[index]  # noqa: E731
        return SlateLog(
            context=self.context[index], action=self.action[index], reward=self.reward[index],
            pscore=self.pscore[index], pscore_cascade=self.pscore_cascade[index],
            pscore_item_position=self.pscore_item_position[index], n_items=self.n_items,
            reward_type=self.reward_type, available=opt(self.available), tick=opt(self.tick),
            user=opt(self.user), metadata=self.metadata)

    # -- Open Bandit Pipeline ------------------------------------------------------------
    def to_obp(self) -> dict:
        """Open Bandit Pipeline's slate ``bandit_feedback`` dict (flat arrays, copies).

        Keys as ``obp.dataset.SyntheticSlateBanditDataset`` produces them: ``n_rounds``,
        ``n_unique_action``, ``slate_id``, ``context``, ``action_context``, ``action``,
        ``position``, ``reward``, ``pscore`` (the slate's, repeated at each position),
        ``pscore_cascade``, ``pscore_item_position``; plus ``len_list`` and, when logged,
        ``available``, ``tick``, ``user``.
        """
        n, k = self.action.shape
        fb = {
            "n_rounds": n,
            "n_unique_action": self.n_items,
            "len_list": k,
            "slate_id": np.repeat(np.arange(n, dtype=np.int64), k),
            "context": self.context.copy(),
            "action_context": np.eye(self.n_items),
            "action": self.action.ravel().copy(),
            "position": np.tile(np.arange(k, dtype=np.int64), n),
            "reward": self.reward.ravel().copy(),
            "pscore": np.repeat(self.pscore, k),
            "pscore_cascade": self.pscore_cascade.ravel().copy(),
            "pscore_item_position": self.pscore_item_position.ravel().copy(),
        }
        for name in ("available", "tick", "user"):
            if getattr(self, name) is not None:
                fb[name] = getattr(self, name).copy()
        return fb

    @classmethod
    def from_obp(cls, bandit_feedback: Mapping[str, Any], *,
                 reward_type: str = "clicks") -> "SlateLog":
        """Build a log from Open Bandit Pipeline's slate ``bandit_feedback`` dict.

        Rows may come in any order; each ``slate_id`` must hold every position
        ``0 .. len_list-1`` once and one ``pscore``. Records are ordered by ``slate_id``.
        """
        if not isinstance(bandit_feedback, Mapping):
            raise TypeError(f"`bandit_feedback` must be a dict; got "
                            f"{type(bandit_feedback).__name__}.")
        need = ("n_unique_action", "slate_id", "context", "action", "position", "reward",
                "pscore", "pscore_cascade", "pscore_item_position")
        missing = [key for key in need if key not in bandit_feedback]
        if missing:
            raise ValueError(f"`bandit_feedback` lacks the key(s) {', '.join(missing)}.")
        fb = bandit_feedback
        sid = np.asarray(fb["slate_id"])
        pos = np.asarray(fb["position"])
        for name, arr in (("slate_id", sid), ("position", pos)):
            _check_int_array(arr, f"bandit_feedback['{name}']")
            if arr.ndim != 1:
                raise ValueError(f"`bandit_feedback['{name}']` must be 1-dimensional; got "
                                 f"shape {arr.shape}.")
        order = np.lexsort((pos, sid))
        ids, counts = np.unique(sid, return_counts=True)
        k = int(counts[0]) if counts.size else 0
        if counts.size == 0 or np.any(counts != k):
            raise ValueError("`bandit_feedback['slate_id']` must give every slate the same "
                             f"number of positions; got counts {sorted(set(counts.tolist()))}.")
        n = ids.size
        P = pos[order].reshape(n, k)
        if np.any(P != np.arange(k)[None, :]):
            bad = int(np.flatnonzero(np.any(P != np.arange(k), axis=1))[0])
            raise ValueError(f"`bandit_feedback['position']` must hold 0 .. {k - 1} once per "
                             f"slate; got {P[bad].tolist()} for slate_id {ids[bad]}.")

        def grid(name):
            arr = np.asarray(fb[name])
            if arr.shape != sid.shape:
                raise ValueError(f"`bandit_feedback['{name}']` must have {sid.size} entries "
                                 f"like `slate_id`; got shape {arr.shape}.")
            return arr[order].reshape(n, k)

        ps = grid("pscore").astype(np.float64)
        bad = np.flatnonzero(np.any(ps != ps[:, :1], axis=1))
        if bad.size:
            raise ValueError(f"`bandit_feedback['pscore']` must be the same at every position "
                             f"of a slate (the slate's probability); got {ps[bad[0]].tolist()} "
                             f"for slate_id {ids[bad[0]]}.")
        extra = {}
        for name in ("available", "tick", "user"):
            if fb.get(name) is not None:
                extra[name] = fb[name]
        return cls(context=fb["context"], action=grid("action"), reward=grid("reward"),
                   pscore=ps[:, 0], pscore_cascade=grid("pscore_cascade"),
                   pscore_item_position=grid("pscore_item_position"),
                   n_items=int(fb["n_unique_action"]), reward_type=reward_type, **extra)

    # -- files ---------------------------------------------------------------------------
    _ARRAYS = ("context", "action", "reward", "pscore", "pscore_cascade", "pscore_item_position",
               "available", "tick", "user")

    def save(self, path) -> Path:
        """Write the log to ``path`` (``.npz``, no pickle, atomic); returns the path written."""
        arrays = {name: getattr(self, name) for name in self._ARRAYS
                  if getattr(self, name) is not None}
        header = {"kind": "SlateLog", "format": _FORMAT_VERSION, "n_items": self.n_items,
                  "reward_type": self.reward_type, "metadata": dict(self.metadata)}
        arrays["__header__"] = np.array(json.dumps(header))
        return _atomic_savez(path, arrays)

    @classmethod
    def load(cls, path) -> "SlateLog":
        """Read a log written by :meth:`save`."""
        data, header = _open_npz(path, "SlateLog")
        with data:
            kw = {key: data[key] for key in data.files if key != "__header__"}
        unknown = sorted(set(kw) - set(cls._ARRAYS))
        if unknown:
            raise LogFormatError(f"{path}: unexpected array(s) {', '.join(unknown)} in a "
                                 "SlateLog file.")
        return cls(n_items=header["n_items"], reward_type=header.get("reward_type", "clicks"),
                   metadata=header.get("metadata", {}), **kw)
