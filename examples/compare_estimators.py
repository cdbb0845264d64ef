"""Your log, your policy, one call: what is the policy worth, and which estimate to trust.

    python examples/compare_estimators.py LOG.csv TARGET
    python examples/compare_estimators.py OBD_DIR        # the Open Bandit Dataset sample

LOG.csv has one logged round per line: the action shown (column ``action`` or ``item_id``),
its reward (``reward`` or ``click``), the logging policy's probability of it (``pscore`` or
``propensity_score``), optionally its ``position``, and your context columns (every other
column; text is one-hot encoded). TARGET is the policy to evaluate, in your own ids: a CSV
of (record, action, [position,] probability), a ``.npy`` array, or ``module:attribute`` of a
function ``policy(context) -> probabilities``. The same from the shell:
``recloop evaluate LOG.csv --target TARGET`` (a report in ``runs/``).

With a directory, the Open Bandit Dataset (its uniformly logged ``random/all`` records) is
the log and the platform's Bernoulli Thompson sampling, from its ``prior_bts.yaml``, the
target (the question the dataset was published for).
"""

import sys
from pathlib import Path

import evaluators
from evaluators.datasets import bernoulli_ts_action_dist, read_bandit_log, read_bts_prior

if len(sys.argv) == 2 and Path(sys.argv[1]).is_dir():  # the Open Bandit Dataset
    root = Path(sys.argv[1])
    prior = read_bts_prior(root / "prior_bts.yaml")["all"]
    log = read_bandit_log(root / "random" / "all" / "all.csv", context="user_feature_",
                          actions=range(prior.n_actions))
    target = bernoulli_ts_action_dist(prior, log.n_actions, log.len_list, n_sim=100_000, rng=0)
elif len(sys.argv) == 3:
    log = read_bandit_log(sys.argv[1])  # your file: columns found by name
    target = sys.argv[2]  # your policy
else:
    sys.exit(__doc__)

result = evaluators.evaluate_log(log, target)  # every estimator, the twin's choice, rng=0
print(result.frame().to_string(index=False, float_format="{:.4g}".format))
print(result.summary())
result.plot().savefig("estimates.png")
print("figure: estimates.png")
