"""The reference library's figures for ``benchmarks/study.py``: Open Bandit Pipeline 0.5.7's
idiomatic evaluation-of-OPE loop on its own synthetic data of the study's shape.

Not part of recloop (OBP is not a dependency): run it in a separate environment where OBP
imports, e.g.::

    python3 -m venv /tmp/obpvenv
    /tmp/obpvenv/bin/pip install --no-deps --ignore-requires-python obp==0.5.7
    /tmp/obpvenv/bin/pip install numpy scipy scikit-learn pandas tqdm matplotlib seaborn pyyaml
    /tmp/obpvenv/bin/pip install torch --index-url https://download.pytorch.org/whl/cpu
    /tmp/obpvenv/bin/python benchmarks/study_obp.py

Per log (``--n`` records, ``--k`` actions, 10 context features, softmax logging): one ridge
``RegressionModel`` cross-fitted on 2 folds, then ``OffPolicyEvaluation`` with IPS, SNIPS,
DM, DR, SNDR, Switch-DR (lambda 10) and DRos (lambda 100) for 3 target policies (greedy
with epsilon 0.1, softmax of 20 x the expected reward, uniform): ``estimate_policy_values``,
and, timed apart, ``estimate_intervals`` (100 bootstrap samples). The logs are drawn before
the clock starts. Prints ONE JSON object on its last line: per-log milliseconds (best of
``--repeat`` passes over ``--logs`` logs) of the regression alone, of the values loop and of
the intervals loop, with the 1-minute load average.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--logs", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    from obp.dataset import SyntheticBanditDataset, linear_behavior_policy, logistic_reward_function
    from obp.ope import (
        DirectMethod,
        DoublyRobust,
        DoublyRobustWithShrinkage,
        InverseProbabilityWeighting,
        OffPolicyEvaluation,
        RegressionModel,
        SelfNormalizedDoublyRobust,
        SelfNormalizedInverseProbabilityWeighting,
        SwitchDoublyRobust,
    )
    from sklearn.linear_model import Ridge

    data = SyntheticBanditDataset(n_actions=args.k, dim_context=10, beta=10.0,
                                  reward_function=logistic_reward_function,
                                  behavior_policy_function=linear_behavior_policy,
                                  random_state=0)
    logs = [data.obtain_batch_bandit_feedback(n_rounds=args.n) for _ in range(args.logs)]

    def targets(fb):
        q = fb["expected_reward"]
        n, K = q.shape
        greedy = np.full((n, K), 0.1 / K)
        greedy[np.arange(n), q.argmax(axis=1)] += 0.9
        s = np.exp(20 * (q - q.max(axis=1, keepdims=True)))
        return [t[:, :, None] for t in (greedy, s / s.sum(axis=1, keepdims=True),
                                        np.full((n, K), 1.0 / K))]

    dists = [targets(fb) for fb in logs]
    estimators = [InverseProbabilityWeighting(), SelfNormalizedInverseProbabilityWeighting(),
                  DirectMethod(), DoublyRobust(), SelfNormalizedDoublyRobust(),
                  SwitchDoublyRobust(lambda_=10.0), DoublyRobustWithShrinkage(lambda_=100.0)]

    def regression(fb, i):
        model = RegressionModel(n_actions=args.k, base_model=Ridge(alpha=1.0), len_list=1)
        return model.fit_predict(context=fb["context"], action=fb["action"],
                                 reward=fb["reward"], n_folds=2, random_state=i)

    def loop(intervals: bool, values: bool = True):
        t0 = time.perf_counter()
        for i, fb in enumerate(logs):
            q = regression(fb, i)
            if not values:
                continue
            ope = OffPolicyEvaluation(bandit_feedback=fb, ope_estimators=estimators)
            for ad in dists[i]:
                if intervals:
                    ope.estimate_intervals(action_dist=ad, estimated_rewards_by_reg_model=q,
                                           n_bootstrap_samples=100, random_state=i)
                else:
                    ope.estimate_policy_values(action_dist=ad,
                                               estimated_rewards_by_reg_model=q)
        return (time.perf_counter() - t0) / len(logs) * 1e3

    load0 = os.getloadavg()[0]
    best = {"regression_ms": [], "values_ms": [], "intervals_ms": []}
    for _ in range(args.repeat):
        best["regression_ms"].append(loop(False, values=False))
        best["values_ms"].append(loop(False))
        best["intervals_ms"].append(loop(True))
    out = {"obp": "0.5.7", "n_rounds": args.n, "n_actions": args.k, "logs": args.logs,
           "targets": 3, "estimators": len(estimators),
           **{k: round(min(v), 2) for k, v in best.items()},
           "load": [round(load0, 2), round(os.getloadavg()[0], 2)]}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
