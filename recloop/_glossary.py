"""What every metric, variant and row label that recloop's built-in kinds emit means.

One table: report.html shows each definition on hover (the summary's ``metric`` and
``variant`` cells, its column headers) and lists those of the run in its *Glossary*
section; ``docs/results.md`` holds the same table (a test checks that every entry is
there, and that every name a built-in scenario emits at its smallest size is defined).

A name is matched whole against each entry's pattern: ``<K>`` stands for a number
(``loo_hit@<K>`` matches ``loo_hit@5``); ``*`` alone, for any text (a user's estimator
named in a scenario).
"""

from __future__ import annotations

import re

__all__ = ["COLUMNS", "GLOSSARY", "define", "scenario_names"]

#: The summary's columns.
COLUMNS = {
    "logs": "Independent logs with an estimate (n); '(k nan)': logs where the estimator gave "
            "no number.",
    "estimate": "Mean of the estimates over the logs (± its standard error where there is no "
                "truth).",
    "truth": "The ground truth from the simulator (its mean when it differs between logs).",
    "bias": "Mean of estimate - truth over the logs.",
    "RMSE": "Root mean square of estimate - truth over the logs.",
    "coverage": "Share of the logs' 95% intervals that contain the truth (k/n: k of n "
                "intervals); blank without intervals or when every interval has zero width.",
    "setting": "The swept parameters that differ between the evaluation's rows.",
    "tick": "The time step of the world at which the quantity is measured.",
    "variant": "The estimator, protocol or correction that produced the estimate.",
    "agent": "The recommender, policy or target policy evaluated ('world': the simulated "
             "world itself, compared with its twin).",
}

#: ``(pattern, definition)``: metrics, variants and row labels.
GLOSSARY: tuple[tuple[str, str], ...] = (
    # --- metrics: values and their errors
    ("value", "The estimated value of the target policy (mean reward per round); its truth is "
              "the exact value in the simulated world."),
    ("online_value", "The agent's value measured online: the mean reward of independent "
                     "online runs (Monte Carlo), the truth of learning-policy evaluation."),
    ("bias", "Estimate minus truth (as a metric: the cell's own mean error over its logs)."),
    ("rmse", "Root mean square error against the truth over the cell's logs."),
    ("mae", "Mean absolute error of the predicted ratings (fast_loo_cf: per held-out rating)."),
    ("relative_rmse", "RMSE divided by the absolute truth."),
    ("coverage", "Share of the 95% intervals that contain the truth."),
    ("width", "Mean width of the 95% intervals."),
    ("nan_rate", "Share of the logs on which the estimator gave no number (failed or no "
                 "support)."),
    ("value_at_matches", "Replay/BRED's estimate compared with the online value V(m) at its "
                         "number of matched records m (not at T)."),
    ("bias_at_matches", "Bias against V(m), the online value at the number of matched "
                        "records m."),
    ("rmse_at_matches", "RMSE against V(m), the online value at the number of matched "
                        "records m."),
    ("coverage_at_matches", "Coverage of the truth V(m) at the number of matched records m."),
    ("mean_matches", "Mean number of records replay matched (kept) per log, about T/K."),
    ("kendall_tau", "Kendall's tau between the evaluator's ordering of the agents and their "
                    "ordering by online value (1: the same order, -1: reversed)."),
    # --- campaign bias and LOO
    ("loo_hit@<K>", "Leave-one-out hit rate at K: the share of held-out profile items the "
                  "recommender ranks in its top K (profile without that item), weighted by "
                  "P(u) P(i|u) (de Myttenaere et al.); its truth is the same score on the "
                  "counterfactual twin without campaigns."),
    ("loo_hit@<K>_sampled", "loo_hit@<K> computed on n_samples sampled (user, item) pairs instead "
                          "of exhaustively: an estimate with an interval."),
    ("loo_hit@<K>_selection_bias", "The part of LOO's bias that item weights remove: the "
                                 "unweighted score minus the weighted one (campaigns changed "
                                 "which items are held out)."),
    ("loo_hit@<K>_structural_bias", "The part of LOO's bias that item weights cannot remove: "
                                  "the weighted score minus the twin's (campaigns changed "
                                  "the profiles the recommender learns from)."),
    ("item_marginal", "P_t(i): the share of profile edges that hold item i at tick t "
                      "(variant itemN). Rows of agent 'world': the estimate column is the "
                      "world with campaigns, the truth column its twin without them."),
    ("kl", "KL(P_t0 || P_t(.|w)): how far the weighted marginal at tick t is from the "
           "reference marginal at t0 (agent item_weights; 0 when the weights match it)."),
    ("unweighted", "LOO as logged: every held-out item with its observed probability."),
    ("weighted_p<K>", "LOO with item weights fitted on the K most shifted items."),
    ("weighted_pall", "LOO with item weights fitted on all items."),
    ("twin", "The same score on the counterfactual twin (the same world, same random "
             "streams, no campaigns): the truth."),
    ("item<K>", "Item number K (a row of item_marginal or item_weights)."),
    # --- fast LOO for kNN
    ("exact_loo", "Exact LOO: similarities recomputed without the held-out rating (Zhang et "
                  "al. 2016); the truth of the fit-once protocols."),
    ("rmse_rank_tau", "Kendall's tau between the similarities' exact-LOO RMSE on the real "
                      "log and on the world fitted to it (1: the world ranks them as the data "
                      "does)."),
    ("mae_rank_tau", "Kendall's tau between the similarities' exact-LOO MAE on the real log "
                     "and on the world fitted to it."),
    ("fit_once_self", "fit_once with the user counted as its own neighbour (what a library "
                      "returns when asked for a user's neighbours)."),
    ("fit_once", "The libraries' protocol: similarities computed once on all ratings, the "
                 "held-out rating included (leaks it)."),
    # --- bandit evaluators
    ("replay", "Replay (Li et al. 2011): keep the logged records where the policy picks the "
               "logged action."),
    ("bred", "BRED (Mary, Preux, Nicol 2014): bootstrapped replay on expanded data, with "
             "Gaussian jitter on the contexts."),
    ("bred_nojitter", "BRED without the jitter on contexts."),
    ("bred_once", "BRED revealing each record once per replicate (not optimistic for "
                  "learners that use the context)."),
    ("bred_window", "BRED on a sliding window of the log (drifting worlds)."),
    ("bred_window_local", "BRED on a sliding window, jitter bandwidth from the window."),
    ("T", "At the log's size T (the horizon of the truth)."),
    ("T_over_K", "At T/K, the horizon replay effectively measures (K arms)."),
    # --- off-policy estimators
    ("ips", "Inverse propensity scoring."),
    ("snips", "Self-normalised IPS."),
    ("direct_method", "Direct method: the reward model's prediction under the target."),
    ("dm", "Direct method: the reward model's prediction under the target."),
    ("doubly_robust", "Doubly robust: direct method plus IPS on its residuals."),
    ("dr", "Doubly robust: direct method plus IPS on its residuals."),
    ("sndr", "Self-normalised doubly robust."),
    ("switch_dr", "Switch-DR: IPS where the weight is small, the direct method elsewhere."),
    ("dr_os", "DR with optimistic shrinkage of the weights."),
    ("dros", "DR with optimistic shrinkage of the weights."),
    ("clipped_ips", "IPS with the importance weights clipped at a threshold."),
    ("mips", "Marginalised IPS over action embeddings (Saito & Joachims 2022)."),
    ("slate_ips", "Slate IPS: the whole slate's importance weight (unbiased, high "
                  "variance)."),
    ("independent_ips", "Independent IPS (IIPS): one weight per position, assuming each "
                        "position's reward depends on its own item only."),
    ("reward_interaction_ips", "Reward-interaction IPS (RIPS): a position's weight covers the "
                               "items above it (cascade-like behaviour)."),
    ("pseudoinverse", "The pseudoinverse estimator (Swaminathan et al. 2017): unbiased when "
                      "the slate's reward is additive over positions."),
    ("cascade_dr", "Cascade doubly robust (Kiyohara et al. 2022): RIPS with a reward model "
                   "as control variate."),
    ("on_policy", "The mean slate reward of the logs against the logging policy's exact "
                  "value (agent: the logging policy): a check of the simulation itself."),
    ("sd", "Standard deviation of the estimates over the logs."),
    ("subgaussian_ips", "IPS with sub-Gaussian weight shrinkage (Metelli et al. 2021)."),
    ("select_by_twin", "The estimator a simulated twin of the log picks: the candidate with "
                       "the least RMSE on logs drawn from a world fitted to the log."),
    ("select_by_cv", "The estimator cross-validated OPE picks (Cief, Kveton & Kompan "
                     "2025): the candidate whose estimate on a training part of the log "
                     "best agrees with an unbiased estimate on the rest, over random "
                     "splits."),
    ("select_by_pasif", "The estimator PAS-IF picks (Udagawa et al. 2023): the candidate "
                        "with the least error on pseudo-logs split from the log so that "
                        "their shift mimics the target's."),
    ("select_by_slope", "The estimator SLOPE's rule picks (Su, Srinath & Krishnamurthy "
                        "2020): Lepski's principle on the candidates' intervals."),
    ("cv", "The pick of cross-validated OPE (evaluators.select_by_cv)."),
    ("pasif", "The pick of PAS-IF (evaluators.select_by_pasif)."),
    ("oracle_ratio", "RMSE of the selector's picks over the oracle's RMSE (1: as good as "
                     "the best single candidate known only with the truth)."),
    ("pick_within", "Share of logs whose picked candidate has an RMSE within 1.2x of the "
                    "oracle's, with its Wilson interval."),
    ("warned", "Share of logs on which the selector warned (its self-check failed or a "
               "candidate was refused), with its Wilson interval."),
    ("truth", "The truth from the data with its interval (OBD: the click rate of the logged "
              "policy's own log; multiclass: the exact value from the labels)."),
    ("relative_error", "Mean of |estimate - truth| / truth over the logs."),
    ("overlap", "Share of the logs whose 95% interval meets the truth's own interval."),
    ("ab_test", "An online A/B test of the target against the logging policy (ab_users "
                "users): the reference every offline estimator is compared with."),
    ("oracle", "The candidate with the least RMSE against the truth (known only in "
               "simulation)."),
    ("slope", "SLOPE: picks an estimator by Lepski's principle on the intervals."),
    ("twin_selection", "The pick of a simulated twin of the log: the candidate with the least "
                       "RMSE on logs drawn from a world fitted to the log."),
    ("untuned", "The estimator family with its default hyper-parameter (no selection)."),
    ("clip=<K>", "A candidate of the family with the importance weights clipped at K."),
    ("clip=inf", "A candidate without clipping."),
    ("lambda_=<K>", "A candidate of the family with shrinkage parameter lambda = K."),
    ("lambda_=inf", "A candidate without shrinkage."),
    ("choice", "The candidate a selector picked (its index among the candidates)."),
    ("regret", "RMSE of the selector's pick minus the oracle's RMSE."),
    ("relative_regret", "RMSE of the selector's pick divided by the oracle's RMSE."),
    ("within", "Share of logs whose pick is within 10% of the oracle's RMSE."),
    ("online_T_over_K", "The ordering by online value at T/K (what replay measures), against "
                        "the ordering at T."),
    ("item_weights", "The fitted item weights w (rows of agent item_weights: the KL of the "
                     "weighted marginal to the reference)."),
    ("world", "The simulated world itself, compared with its counterfactual twin."),
    ("*", "An estimator or variant named in the scenario (a plugin or a user's function)."),
)


def scenario_names(scenario: dict | None) -> dict[str, str]:
    """Definitions of the names a scenario gives its estimators (``{name, factory,
    params}`` tables): ``ips_clip10`` is "ips with clip = 10.0"."""
    import json

    out = {}
    for ev in (scenario or {}).get("evaluations", ()):
        for e in ev.get("estimators") or ():
            if isinstance(e, dict) and isinstance(e.get("name"), str):
                params = ", ".join(f"{k} = {json.dumps(v)}"
                                   for k, v in (e.get("params") or {}).items())
                what = define(str(e.get("factory", ""))) or ""
                out[e["name"]] = (f"{e.get('factory', '?')}" + (f" with {params}" if params
                                                                 else "")
                                  + " (named in the scenario)" + (f": {what}" if what else ""))
    return out


def _regex(pattern: str) -> re.Pattern:
    out = ""
    if pattern == "*":
        return re.compile(".+", re.S)
    for part in re.split(r"(<K>)", pattern):
        out += "[0-9]+" if part == "<K>" else re.escape(part)
    return re.compile(out)


_COMPILED = [(p, _regex(p), d) for p, d in GLOSSARY]


def define(name: str, *, fallback: bool = False) -> str | None:
    """The definition of ``name`` (``None``: not defined; ``fallback=False`` leaves out
    the catch-all of users' names)."""
    for pattern, rx, definition in _COMPILED:
        if pattern == "*" and not fallback:
            continue
        if rx.fullmatch(name):
            return definition
    return None


def entry(name: str) -> str | None:
    """The glossary's pattern that defines ``name``."""
    for pattern, rx, _ in _COMPILED:
        if pattern != "*" and rx.fullmatch(name):
            return pattern
    return None
