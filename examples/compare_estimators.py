"""Compare off-policy estimators on your log, and see on a simulated twin which to trust.

    python examples/compare_estimators.py [LOG.npz | OBD_DIR] [--quick]

Your log is a ``simulator.logs.BanditLog`` (``BanditLog.load``, ``BanditLog.from_obp`` for
Open Bandit Pipeline's dict; for the Open Bandit Dataset, a directory, the first slot of
its uniformly logged ``random/all`` records). Without an argument a log is simulated and
saved to a temporary ``.npz``. The target: epsilon-greedy (0.1) around the arm with the best
reward in the first half of the log; IPS, SNIPS, DM and DR estimate its value on the second
half, with 95% intervals -- but a real log has no truth. The twin has one: a simulated
bandit with as many arms and records, logged the same way (uniformly or not), on which
``recloop.run`` scores each estimator against the exact value over many logs (its rewards
are not yours: it measures the estimators at your size and logging, not your click rates).
"""

import sys
import tempfile
from pathlib import Path

import numpy as np

import evaluators
import recloop
import simulator
from simulator.logs import BanditLog

quick = "--quick" in sys.argv
args = [a for a in sys.argv[1:] if a != "--quick"]
if args and Path(args[0]).is_dir():  # the Open Bandit Dataset
    from evaluators.datasets import load_open_bandit

    log = load_open_bandit(args[0], behavior_policy="random", campaign="all")
    log = log.take(np.flatnonzero(log.positions() == 0))
elif args:
    log = BanditLog.load(args[0])
else:
    path = Path(tempfile.mkdtemp()) / "my_log.npz"
    simulator.collect_log(simulator.preset("bred_linear"), 2000, rng=0)[0].save(path)
    log = BanditLog.load(path)

K, half = log.n_actions, log.n_rounds // 2
first, rest = log.take(np.arange(half)), log.take(np.arange(half, log.n_rounds))
shown = np.maximum(np.bincount(first.action, None, K), 1)
target = np.full(K, 0.1 / K)
target[np.argmax(np.bincount(first.action, first.reward, K) / shown)] += 0.9
n = rest.n_rounds
action_dist = np.broadcast_to(target, (n, K))[:, :, None]  # OBP's shape (n, K, 1)

print(f"Your log: {log.n_rounds:,} records, {K} arms. The target's value on {n:,} of them:")
for name in ("ips", "snips", "direct_method", "doubly_robust"):
    e = getattr(evaluators, name)(rest, action_dist)
    print(f"  {name:<14} {e.value:.4f}  95% interval [{e.ci_low:.4f}, {e.ci_high:.4f}]")

skewed = not np.allclose(rest.pscore, 1 / K)
twin = {"run": {"name": "twin"}, "world": {"preset": "bred_linear"},
        "evaluations": [{"kind": "ope", "name": "twin", "n_actions": K, "n_rounds": n,
                         "n_logs": 10 if quick else 100,
                         "logging": "softmax" if skewed else "uniform",
                         "targets": [{"name": "eps_greedy", "policy": "epsilon_greedy",
                                      "epsilon": 0.1}],
                         "estimators": ["ips", "snips", "direct_method", "doubly_robust"]}]}
table = recloop.run(twin, workers=1, progress=False).summary()
print(f"\nOn the simulated twin ({'skewed' if skewed else 'uniform'} logging), against the "
      f"exact value, over {table['n'].max()} logs:")
print(table[["variant", "estimate", "truth", "bias", "rmse", "coverage"]].to_string(
    index=False, float_format="{:.4f}".format))
