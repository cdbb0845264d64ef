"""``check_agent``: the contract every agent must honour, run in the tests and by users.

Modelled on Gymnasium's ``check_env``: one call on a fresh agent exercises the protocol of
:mod:`agents._base` on small synthetic inputs and raises :class:`AgentCheckError` naming the
first broken rule. It never uses ``assert`` (which ``python -O`` removes).
"""

from __future__ import annotations

import copy

import numpy as np
import scipy.sparse as sp

from agents._base import BanditPolicy, Recommender, as_generator
from recloop_base.fast_paths import fast_path

__all__ = ["AgentCheckError", "check_agent"]


class AgentCheckError(AssertionError):
    """An agent broke the protocol; the message names the agent and the rule."""


def _fail(agent, rule: str):
    raise AgentCheckError(f"{agent!r}: {rule}")


def check_agent(agent, *, profiles=None, k: int = 3, n_actions: int = 5,
                context_dim: int = 3, n_steps: int = 40, rng=None) -> None:
    """Check that a fresh agent honours the recloop agent protocol.

    The family is recognised by duck typing: an object with ``fit`` and ``recommend`` is
    checked as a recommender, one with ``act``, ``update`` and ``reset`` as a bandit policy
    (an object with both is checked as both).

    Recommenders (pass an agent that has not been fitted yet):

    * ``recommend`` before ``fit`` raises ``RuntimeError``;
    * ``fit(profiles)`` returns the agent, leaves ``profiles`` untouched and keeps no reference
      to it (overwriting the caller's buffers afterwards changes no recommendation);
    * ``recommend(users, k, removed=...)`` returns an integer array ``(len(users), k)`` of
      distinct item ids in ``[0, n_items)``, for every held ``(user, item)`` pair as
      ``removed``, also for ``k = 1`` and for an empty ``users``; batching changes nothing
      (row j equals the call for ``users[j]`` alone); repeated calls agree; refitting on
      another catalogue works;
    * ``k = 0``, ``k = n_items + 1``, an unknown user, ``removed`` of the wrong length and a
      ``removed`` item the user does not hold raise ``ValueError`` naming the argument.

    Bandit policies (observations are dicts with ``context`` (d,) and ``available`` (K,)):

    * ``act`` returns an int that is an available arm, on masks that change at every step
      (arms appear and vanish), including a single available arm; a mask with no
      available arm raises ``ValueError`` or ``RuntimeError``;
    * where ``action_probabilities`` is defined: shape (K,), >= 0, sums to 1, 0 on
      unavailable arms, positive on the action ``act`` then takes; it is a pure query (calling
      it does not change later actions);
    * ``update(observation, action, reward)`` is accepted;
    * ``reset(seed)`` forgets what was learnt: the same seed replays the same actions;
    * no call mutates the observation;
    * fast paths, where :func:`agents.fast_path` would take them: ``replay_arrays`` returns
      the actions of the ``act`` / ``update`` loop it stands for on a random log (all records
      in order; then a walk with repeated records, float32 jitter, rejected steps and
      reveal-once), and leaves the agent in the loop's state (the next actions agree);
      ``type(agent).batch`` of 3 copies acts as the 3 agents stepped alone, with masks and
      learning copies that differ, and its own ``replay_arrays`` (if a fast path) equals
      each copy's loop.

    Parameters
    ----------
    agent : object
        A fresh agent (recommender not fitted; bandit state is reset by the check). The
        check leaves it fitted on, or having learnt from, the synthetic data.
    profiles : sparse matrix (n_users, n_items), optional
        Profiles for a recommender (default: random 1-5 ratings on 12 users x 7 items with an
        empty user and a single-item user; binary recommenders treat nonzero as held).
    k : int, default 3
        List length used for the recommender checks (besides ``k = 1``).
    n_actions, context_dim : int
        Size of the synthetic bandit problem.
    n_steps : int
        Steps per bandit rollout.
    rng : None, int, SeedSequence or Generator
        Randomness of the synthetic inputs (the agent's own seeds are drawn from it).

    Raises
    ------
    AgentCheckError
        The first rule the agent breaks, with the agent's repr.
    TypeError
        ``agent`` is neither a recommender nor a bandit policy.

    Examples
    --------
    >>> from agents import Popularity
    >>> check_agent(Popularity(), rng=0)
    """
    gen = as_generator(rng)
    is_rec = callable(getattr(agent, "fit", None)) and callable(getattr(agent, "recommend", None))
    is_bandit = all(callable(getattr(agent, m, None)) for m in ("act", "update", "reset"))
    if not (is_rec or is_bandit):
        raise TypeError(f"`agent` must be a recommender (fit, recommend) or a bandit policy "
                        f"(reset, act, update); got {type(agent).__name__}.")
    if is_rec:
        _check_recommender(agent, profiles, k, gen)
    if is_bandit:
        _check_bandit(agent, n_actions, context_dim, n_steps, gen)


# --------------------------------------------------------------------------- recommenders


def _default_profiles(gen, n_users=12, n_items=7):
    dense = (gen.random((n_users, n_items)) < 0.45) * gen.integers(1, 6, (n_users, n_items))
    dense[0] = 0                      # an empty profile
    dense[1] = 0
    dense[1, gen.integers(n_items)] = 4  # a single-item profile: LOO leaves it empty
    dense[2, :2] = [5, 3]               # at least one multi-item profile
    return sp.csr_array(dense.astype(np.float64))


def _expect_error(agent, exc, names, call, what):
    try:
        call()
    except exc as err:
        if names and not any(n in str(err) for n in names):
            _fail(agent, f"{what} raised {type(err).__name__} without naming "
                         f"{' or '.join(names)}: {err}")
        return
    except Exception as err:  # noqa: BLE001 - report what was raised instead
        _fail(agent, f"{what} must raise {_names(exc)}; raised {type(err).__name__}: {err}")
    _fail(agent, f"{what} must raise {_names(exc)}; nothing was raised.")


def _names(exc):
    return " or ".join(e.__name__ for e in (exc if isinstance(exc, tuple) else (exc,)))


def _check_list(agent, out, n_rows, k, n_items, what):
    if not isinstance(out, np.ndarray):
        _fail(agent, f"{what} must return a numpy array; got {type(out).__name__}.")
    if out.shape != (n_rows, k):
        _fail(agent, f"{what} must return shape {(n_rows, k)}; got {out.shape}.")
    if out.size and not np.issubdtype(out.dtype, np.integer):
        _fail(agent, f"{what} must return integer item ids; got dtype {out.dtype}.")
    if out.size and (out.min() < 0 or out.max() >= n_items):
        _fail(agent, f"{what} returned item ids outside [0, {n_items}): {out.min()}..{out.max()}.")
    srt = np.sort(out, axis=1)
    if np.any(srt[:, 1:] == srt[:, :-1]):
        row = int(np.flatnonzero(np.any(srt[:, 1:] == srt[:, :-1], axis=1))[0])
        _fail(agent, f"{what} returned a repeated item in row {row}: {out[row].tolist()}.")


def _check_recommender(agent, profiles, k, gen):
    if not isinstance(agent, Recommender):
        _fail(agent, "does not satisfy the `Recommender` protocol.")
    if profiles is None:
        profiles = _default_profiles(gen)
    profiles = sp.csr_array(profiles)
    n_users, n_items = profiles.shape
    if not 1 <= k <= n_items:
        raise ValueError(f"`k` must be in [1, n_items={n_items}]; got {k}.")
    _expect_error(agent, RuntimeError, (), lambda: agent.recommend(np.arange(n_users), 1),
                  "recommend before fit")

    given = profiles.copy()
    snapshot = [a.copy() for a in (given.data, given.indices, given.indptr)]
    if agent.fit(given) is not agent:
        _fail(agent, "fit must return the agent itself.")
    for a, b in zip(snapshot, (given.data, given.indices, given.indptr), strict=True):
        if a.shape != b.shape or not np.array_equal(a, b):
            _fail(agent, "fit mutated its `profiles` argument.")

    users = np.arange(n_users)
    edge_users = np.repeat(users, np.diff(profiles.indptr))
    edge_items = profiles.indices.astype(np.int64)
    plain = agent.recommend(users, k)
    _check_list(agent, plain, n_users, k, n_items, f"recommend(all users, k={k})")
    loo = agent.recommend(edge_users, k, removed=edge_items)
    _check_list(agent, loo, edge_users.size, k, n_items, f"recommend(k={k}, removed=...)")
    _check_list(agent, agent.recommend(users, 1), n_users, 1, n_items, "recommend(k=1)")
    _check_list(agent, agent.recommend(np.array([], dtype=np.int64), k), 0, k, n_items,
                "recommend(no users)")
    if not np.array_equal(agent.recommend(users, k), plain):
        _fail(agent, "two identical recommend calls returned different lists.")

    # batching must not matter: each row equals the call for that user alone
    picks = gen.choice(edge_users.size, size=min(6, edge_users.size), replace=False)
    for j in picks:
        alone = agent.recommend(edge_users[j:j + 1], k, removed=edge_items[j:j + 1])
        if not np.array_equal(alone[0], loo[j]):
            _fail(agent, f"recommend for user {edge_users[j]} without item {edge_items[j]} "
                         f"differs alone ({alone[0].tolist()}) and in a batch "
                         f"({loo[j].tolist()}).")
    shuffled = gen.permutation(n_users)
    if not np.array_equal(agent.recommend(shuffled, k), plain[shuffled]):
        _fail(agent, "recommend depends on the order of `users`.")

    # the fitted model must not share the caller's buffers
    given.data[:] = 0.0
    given.indices[:] = 0
    if not np.array_equal(agent.recommend(users, k), plain):
        _fail(agent, "fit kept a reference to `profiles`: overwriting them after fit changed "
                     "the recommendations.")

    missing = np.argwhere(profiles.toarray() == 0) if n_users * n_items <= 10**6 else []
    bad_calls = [
        ("k=0", ("`k`",), lambda: agent.recommend(users, 0)),
        (f"k=n_items+1={n_items + 1}", ("`k`",), lambda: agent.recommend(users, n_items + 1)),
        (f"unknown user {n_users}", ("`users`",), lambda: agent.recommend([n_users], 1)),
        ("user -1", ("`users`",), lambda: agent.recommend([-1], 1)),
        ("`removed` of the wrong length", ("`removed`",),
         lambda: agent.recommend(users, 1, removed=np.zeros(n_users + 1, dtype=np.int64))),
    ]
    if len(missing):
        u, i = (int(x) for x in missing[0])
        bad_calls.append((f"`removed` item {i} not held by user {u}", ("`removed",),
                          lambda: agent.recommend([u], 1, removed=[i])))
    for what, names, call in bad_calls:
        _expect_error(agent, ValueError, names, call, f"recommend with {what}")

    # refitting on another catalogue replaces the model
    other = _default_profiles(gen, n_users=5, n_items=n_items + 2)
    agent.fit(other)
    _check_list(agent, agent.recommend(np.arange(5), k), 5, k, n_items + 2,
                "recommend after refitting on a larger catalogue")


# --------------------------------------------------------------------------- bandits


def _observations(gen, n_steps, n_actions, d):
    out = []
    for t in range(n_steps):
        avail = gen.random(n_actions) < 0.6
        if t % 7 == 3:  # a single available arm
            avail[:] = False
        if not avail.any():
            avail[gen.integers(n_actions)] = True
        out.append({"context": gen.normal(size=d), "available": avail,
                    "user": int(gen.integers(100)), "tick": t})
    return out


def _snapshot(obs):
    return {key: copy.deepcopy(val) for key, val in obs.items()}


def _same(obs, snap):
    if obs.keys() != snap.keys():
        return False
    for key, val in snap.items():
        new = obs[key]
        if isinstance(val, np.ndarray):
            if not (isinstance(new, np.ndarray) and new.dtype == val.dtype
                    and np.array_equal(new, val)):
                return False
        elif new != val:
            return False
    return True


def _rollout(agent, seed, observations, rewards, *, query):
    agent.reset(np.random.default_rng(seed))
    probs = getattr(agent, "action_probabilities", None)
    actions = []
    for t, obs in enumerate(observations):
        snap = _snapshot(obs)
        p = None
        if query and callable(probs):
            p = probs(obs)
            _check_probabilities(agent, p, obs["available"], t)
        a = agent.act(obs)
        if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer)):
            _fail(agent, f"act must return an int; got {type(a).__name__} at step {t}.")
        a = int(a)
        if not (0 <= a < obs["available"].size and obs["available"][a]):
            _fail(agent, f"act returned arm {a}, which is not available at step {t} "
                         f"(available: {np.flatnonzero(obs['available']).tolist()}).")
        if p is not None and not p[a] > 0:
            _fail(agent, f"act took arm {a} at step {t}, to which action_probabilities gave "
                         f"probability {p[a]}.")
        agent.update(obs, a, rewards[t, a])
        if not _same(obs, snap):
            _fail(agent, f"act/update/action_probabilities mutated the observation at step {t}.")
        actions.append(a)
    return actions


def _check_probabilities(agent, p, avail, t):
    p = np.asarray(p)
    if p.shape != avail.shape:
        _fail(agent, f"action_probabilities must have shape {avail.shape}; got {p.shape} at "
                     f"step {t}.")
    if not np.all(np.isfinite(p)) or np.any(p < 0):
        _fail(agent, f"action_probabilities must be finite and >= 0; got {p.tolist()} at step "
                     f"{t}.")
    if not abs(p.sum() - 1.0) <= 1e-9:
        _fail(agent, f"action_probabilities must sum to 1; got {p.sum()!r} at step {t}.")
    if np.any(p[~avail] != 0):
        _fail(agent, f"action_probabilities must be 0 on unavailable arms; got "
                     f"{p.tolist()} with available {avail.tolist()} at step {t}.")


def _check_bandit(agent, n_actions, d, n_steps, gen):
    if not isinstance(agent, BanditPolicy):
        _fail(agent, "does not satisfy the `BanditPolicy` protocol.")
    observations = _observations(gen, n_steps, n_actions, d)
    # contextual rewards so learners have something to learn and diverge across seeds
    rewards = (gen.random((n_steps, n_actions)) < 0.3 + 0.4 * (np.arange(n_actions) % 2))
    rewards = rewards.astype(np.float64)
    seed = int(gen.integers(2**32))

    first = _rollout(agent, seed, observations, rewards, query=True)
    again = _rollout(agent, seed, observations, rewards, query=True)
    if again != first:
        t = next(i for i, (a, b) in enumerate(zip(first, again, strict=True)) if a != b)
        _fail(agent, f"reset(rng) with the same seed must replay the same actions; they "
                     f"first differ at step {t} ({first[t]} then {again[t]}).")
    if callable(getattr(agent, "action_probabilities", None)):
        silent = _rollout(agent, seed, observations, rewards, query=False)
        if silent != first:
            _fail(agent, "calling action_probabilities changed the actions taken afterwards; "
                         "it must be a pure query.")

    empty = {"context": np.zeros(d), "available": np.zeros(n_actions, dtype=bool)}
    agent.reset(np.random.default_rng(seed))
    _expect_error(agent, (ValueError, RuntimeError), (), lambda: agent.act(empty),
                  "act on an observation with no available arm")

    if fast_path(agent, "replay_arrays") is not None:
        _check_replay_arrays(agent, observations, rewards, seed, gen)
    if fast_path(agent, "batch") is not None:
        _check_batch(agent, observations, rewards, seed, gen)


# --------------------------------------------------------------------------- fast paths


def _log_arrays(observations, rewards, gen):
    """A uniformly logged log of the observations: (context, available, logged, reward)."""
    X = np.array([o["context"] for o in observations], dtype=np.float64)
    avail = np.array([o["available"] for o in observations], dtype=np.bool_)
    logged = np.array([gen.choice(np.flatnonzero(row)) for row in avail], dtype=np.int64)
    return X, avail, logged, rewards[np.arange(len(observations)), logged]


def _walk_options(gen, T, n, d, lead=()):
    """index (repeats), eligible, float32 jitter and its scale: BRED's way of walking a log."""
    return dict(index=gen.integers(0, T, size=lead + (n,)),
                eligible=gen.random(lead + (n,)) < 0.8,
                jitter=gen.standard_normal(lead + (n, d), dtype=np.float32),
                jitter_scale=gen.random(d) * 0.3)


def _loop_replay(agent, X, avail, logged, reward, index=None, eligible=None, jitter=None,
                 jitter_scale=None, revealed=None):
    """The act/update loop that ``replay_arrays`` stands for (its definition)."""
    n = X.shape[0] if index is None else index.shape[0]
    out = []
    for j in range(n):
        r = j if index is None else int(index[j])
        x = X[r] if jitter is None else X[r] + jitter[j].astype(np.float64) * jitter_scale
        obs = {"context": x, "available": avail[r]}
        a = int(agent.act(obs))
        out.append(a)
        if a == logged[r] and (eligible is None or eligible[j]):
            if revealed is not None:
                if revealed[r]:
                    continue
                revealed[r] = True
            agent.update(obs, a, reward[r])
    return np.array(out, dtype=np.int64)


def _same_actions(agent, got, want, what):
    got = np.asarray(got)
    if got.shape != want.shape:
        _fail(agent, f"{what} returned shape {got.shape}; the act/update loop gives "
                     f"{want.shape}.")
    if not np.array_equal(got, want):
        j = np.argwhere(got != want)[0]
        _fail(agent, f"{what} disagrees with the act/update loop it stands for: action "
                     f"{got[tuple(j)]} instead of {want[tuple(j)]} at step {tuple(j.tolist())}.")


def _next_actions(agent, observations, what, want=None):
    got = [int(agent.act(o)) for o in observations[:5]]
    if want is not None and got != want:
        _fail(agent, f"after {what}, the agent is not in the state the act/update loop leaves "
                     f"it in: the next actions are {got}, not {want}.")
    return got


def _check_replay_arrays(agent, observations, rewards, seed, gen):
    X, avail, logged, reward = _log_arrays(observations, rewards, gen)
    T, d = X.shape
    opts = _walk_options(gen, T, 2 * T, d)
    for label, kw in (("replay_arrays(all records)", {}),
                      ("replay_arrays(index, eligible, jitter, jitter_scale)", opts),
                      ("replay_arrays(..., revealed) (reveal once)",
                       dict(opts, revealed=np.zeros(T, dtype=bool)))):
        agent.reset(np.random.default_rng(seed))
        rev_loop = None if "revealed" not in kw else np.zeros(T, dtype=bool)
        want = _loop_replay(agent, X, avail, logged, reward,
                            **dict(kw, **({} if rev_loop is None else {"revealed": rev_loop})))
        after = _next_actions(agent, observations, label)
        agent.reset(np.random.default_rng(seed))
        try:
            got = agent.replay_arrays(X, avail, logged, reward, **kw)
        except Exception as err:  # noqa: BLE001 - report what was raised instead
            _fail(agent, f"{label} raised {type(err).__name__}: {err}")
        _same_actions(agent, got, want, label)
        if rev_loop is not None and not np.array_equal(kw["revealed"], rev_loop):
            _fail(agent, f"{label} marked other records as revealed than the loop does.")
        _next_actions(agent, observations, label, after)


def _check_batch(agent, observations, rewards, seed, gen):
    B = 3
    seeds = [seed + 1 + i for i in range(B)]

    def fresh():
        out = []
        for s in seeds:
            a = copy.deepcopy(agent)
            a.reset(np.random.default_rng(s))
            out.append(a)
        return out

    singles, copies = fresh(), fresh()
    try:
        twin = type(agent).batch(copies)
    except Exception as err:  # noqa: BLE001 - report what was raised instead
        _fail(agent, f"batch of {B} fresh copies raised {type(err).__name__}: {err}")
    # copy i sees observation (t + i) mod T: contexts and masks differ between copies
    T = len(observations)
    for t in range(T):
        obs = [observations[(t + i) % T] for i in range(B)]
        X = np.array([o["context"] for o in obs], dtype=np.float64)
        avail = np.array([o["available"] for o in obs], dtype=np.bool_)
        got = np.asarray(twin.act(X, avail))
        want = np.array([a.act(o) for a, o in zip(singles, obs, strict=True)], dtype=np.int64)
        _same_actions(agent, got, want, f"batch(...).act at step {t}")
        r = np.array([rewards[(t + i) % T, want[i]] for i in range(B)])
        active = gen.random(B) < 0.7
        twin.update(active, X, want, r)
        for i in np.flatnonzero(active):
            singles[i].update(obs[i], int(want[i]), float(r[i]))
    if fast_path(twin, "replay_arrays") is None:
        return
    X, avail, logged, reward = _log_arrays(observations, rewards, gen)
    opts = _walk_options(gen, T, 2 * T, X.shape[1], lead=(B,))
    revealed = np.zeros((B, T), dtype=bool)
    try:
        got = twin.replay_arrays(X, avail, logged, reward, revealed=revealed, **opts)
    except Exception as err:  # noqa: BLE001 - report what was raised instead
        _fail(agent, f"batch(...).replay_arrays raised {type(err).__name__}: {err}")
    for i, a in enumerate(singles):
        rev = np.zeros(T, dtype=bool)
        want = _loop_replay(a, X, avail, logged, reward, index=opts["index"][i],
                            eligible=opts["eligible"][i], jitter=opts["jitter"][i],
                            jitter_scale=opts["jitter_scale"], revealed=rev)
        _same_actions(agent, np.asarray(got)[i], want,
                      f"copy {i} of batch(...).replay_arrays")
        if not np.array_equal(revealed[i], rev):
            _fail(agent, f"copy {i} of batch(...).replay_arrays marked other records as "
                         f"revealed than the loop does.")
