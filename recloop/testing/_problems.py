"""Small bandit problems with their exact ground truth, for checking estimators."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from scipy.special import expit, softmax

from recloop_base.validation import as_generator
from simulator.logs import BanditLog

__all__ = ["BanditProblem", "DrawnLog", "random_bandit_problem", "LOGGING_POLICIES"]

LOGGING_POLICIES = ("uniform", "softmax", "epsilon_greedy")


class DrawnLog(NamedTuple):
    """What :meth:`BanditProblem.draw_log` returns: the input of an estimator call, a named
    pair that unpacks as ``log, action_dist = problem.draw_log(seed)``.

    Attributes
    ----------
    log : simulator.logs.BanditLog
        The logged records (contexts, actions, rewards, propensities ``pscore``).
    action_dist : ndarray of shape (n_rounds, n_actions, 1)
        The target policy's action probabilities on the log's contexts (OBP's shape).
    """

    log: BanditLog
    action_dist: np.ndarray


@dataclass(frozen=True, eq=False)
class BanditProblem:
    """A contextual bandit whose target-policy value is known exactly.

    Contexts are drawn uniformly from a finite support (``support``, shape (m, d)), so the
    value of any static policy is an exact finite sum. Rewards are Bernoulli with
    ``q(x, a) = expit(theta_a . x + bias_a)``.

    Attributes
    ----------
    support : array (m, d)
        The context support.
    theta : array (n_actions, d); bias : array (n_actions,)
        The reward model.
    logging : str
        ``"uniform"``, ``"softmax"`` or ``"epsilon_greedy"`` (on the logging scores). The
        softmax logger is mixed with the uniform policy, ``(1 - epsilon) softmax + epsilon /
        n_actions``, like the epsilon-greedy one: every action keeps probability at least
        ``epsilon / n_actions``, so importance weights stay below ``n_actions / epsilon``
        (15 at three actions) and a correct estimator's normal interval holds its level at
        a few hundred rounds.
    logging_scores : array (n_actions, d)
        Linear scores of the logging policy (softmax / greedy arm).
    target_scores : array (n_actions, d)
        Linear scores of the target policy (a softmax with temperature ``target_temperature``).
    deficient : int or None
        An action the logging policy never takes (``None``: full support).
    target_action : int or None
        When set, the target policy always takes this action (instead of the softmax).
    n_rounds : int
        Default size of the logs :meth:`draw_log` draws (the checker sets the size of the
        failing example, so that ``problem.draw_log(seed)`` gives it back).
    """

    support: np.ndarray
    theta: np.ndarray
    bias: np.ndarray
    logging: str
    logging_scores: np.ndarray
    target_scores: np.ndarray
    target_temperature: float = 1.0
    epsilon: float = 0.2  # uniform share of the softmax and epsilon-greedy loggers
    deficient: int | None = None
    target_action: int | None = None
    n_rounds: int = 200

    @property
    def n_actions(self) -> int:
        return int(self.theta.shape[0])

    @property
    def dim(self) -> int:
        return int(self.support.shape[1])

    def expected_reward(self, context) -> np.ndarray:
        """True ``q(x, a)`` for every row of ``context``: shape (n, n_actions)."""
        return expit(np.asarray(context) @ self.theta.T + self.bias)

    def logging_probs(self, context) -> np.ndarray:
        """The logging policy's action probabilities, shape (n, n_actions)."""
        context = np.asarray(context)
        k = self.n_actions
        if self.logging == "uniform":
            p = np.full((context.shape[0], k), 1.0 / k)
        elif self.logging == "softmax":
            p = ((1 - self.epsilon) * softmax(context @ self.logging_scores.T, axis=1)
                 + self.epsilon / k)
        else:
            greedy = np.argmax(context @ self.logging_scores.T, axis=1)
            p = np.full((context.shape[0], k), self.epsilon / k)
            p[np.arange(context.shape[0]), greedy] += 1 - self.epsilon
        if self.deficient is not None:
            p[:, self.deficient] = 0.0
            p /= p.sum(axis=1, keepdims=True)
        return p

    def target_probs(self, context) -> np.ndarray:
        """The target policy's action probabilities, shape (n, n_actions)."""
        if self.target_action is not None:
            p = np.zeros((np.shape(context)[0], self.n_actions))
            p[:, self.target_action] = 1.0
            return p
        return softmax(np.asarray(context) @ self.target_scores.T / self.target_temperature, axis=1)

    @property
    def value(self) -> float:
        """Exact expected reward of the target policy (uniform over the context support)."""
        return float(np.mean(np.sum(self.target_probs(self.support)
                                    * self.expected_reward(self.support), axis=1)))

    def draw_log(self, seed, n_rounds: int | None = None) -> DrawnLog:
        """The log of ``seed`` and the target's ``action_dist`` (n, K, 1), as a
        :class:`DrawnLog` ``(log, action_dist)``: the same as :meth:`sample` with
        ``n_rounds`` defaulting to the problem's ``n_rounds`` (the checker sets it to the
        failing example's size)."""
        return self.sample(self.n_rounds if n_rounds is None else n_rounds, seed)

    def sample(self, n_rounds: int, rng) -> DrawnLog:
        """Draw a log of ``n_rounds`` records and the target's ``action_dist`` (n, K, 1),
        as a :class:`DrawnLog` ``(log, action_dist)``.

        The log carries the logging policy's probabilities (``pi_b``) and the identity as
        ``action_embeddings`` (each action its own embedding, where MIPS is IPS)."""
        rng = as_generator(rng)
        idx = rng.integers(0, self.support.shape[0], n_rounds)
        x = self.support[idx]
        p = self.logging_probs(x)
        u = rng.random(n_rounds)
        action = np.minimum((p.cumsum(axis=1) < u[:, None]).sum(axis=1), self.n_actions - 1)
        # never log a zero-probability action, even at the edge of the cumulative sum
        zero = p[np.arange(n_rounds), action] == 0
        action[zero] = np.argmax(p[zero], axis=1)
        q = self.expected_reward(x)[np.arange(n_rounds), action]
        reward = (rng.random(n_rounds) < q).astype(np.float64)
        # the logger knows its own policy (pi_b); each action is its own embedding
        log = BanditLog(context=x, action=action, reward=reward,
                        pscore=p[np.arange(n_rounds), action], n_actions=self.n_actions,
                        pi_b=p, action_embeddings=np.arange(self.n_actions)[:, None])
        return DrawnLog(log, self.target_probs(x)[:, :, None])


def random_bandit_problem(rng=None, *, n_actions: int = 3, dim: int = 2, n_contexts: int = 8,
                          logging: str = "uniform", deficient: bool = False) -> BanditProblem:
    """Draw a :class:`BanditProblem` (reward model, logging and target policies)."""
    rng = as_generator(rng)
    if logging not in LOGGING_POLICIES:
        raise ValueError(f"`logging` must be one of {LOGGING_POLICIES}; got {logging!r}.")
    least = 2 if deficient else 1  # a deficient problem needs an action left to log
    if n_actions < least:
        raise ValueError(f"`n_actions` must be >= {least}; got {n_actions}.")
    return BanditProblem(
        support=rng.normal(size=(n_contexts, dim)),
        theta=rng.normal(size=(n_actions, dim)),
        bias=rng.normal(-0.5, 0.75, size=n_actions),
        logging=logging,
        logging_scores=rng.normal(size=(n_actions, dim)),
        target_scores=rng.normal(size=(n_actions, dim)),
        deficient=n_actions - 1 if deficient else None,
    )
