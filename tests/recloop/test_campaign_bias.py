"""Campaign-bias experiment: the paper's claims at reduced size, the rows it returns, figures,
bad input."""

import math

import numpy as np
import pytest
import scipy.sparse as sp

import agents
import simulator
from recloop._results import Measurement
from recloop.experiments import campaign_bias, plot_campaign_bias

KINDS = {"g1": "constant_agreeing", "g2": "constant_disagreeing",
         "user_cosine_cf": "user_cosine_cf", "naive_cf": "naive_cf"}


def table(rows, metric="loo_hit@5"):
    return {(r.agent, r.variant, r.tick): r for r in rows if r.metric == metric}


P_VALUES = (0, 5, 10, 20, 40, None)  # None: all items


def smallest_stabilising_p(s, g, ticks, tol=0.03):
    """The smallest p in P_VALUES whose weighted score stays within +-tol of the unweighted
    score at the window's first tick at every evaluated tick (P_VALUES has None last)."""
    base = s[g, "unweighted", ticks[0]]
    for p in P_VALUES:
        v = "weighted_pall" if p is None else f"weighted_p{p}"
        if all(abs(s[g, v, t] / base - 1) <= tol for t in ticks):
            return p
    raise AssertionError(f"{g} never stabilises, not even with all items reweighted")


@pytest.mark.slow
def test_paper_claims_at_reduced_size():
    # de Myttenaere et al.: without weights the score of a constant recommender that agrees
    # with the campaigns (g1) rises and one that disagrees (g2) falls; with all items
    # reweighted both stay at their value at the window's first tick and at the twin's; and
    # g2 needs a larger p than g1 to stabilise.
    config = simulator.preset("viadeo_like", n_users=3000)
    ticks = tuple(range(300, 501, 20))  # during and after each campaign (330-349, 430-449)
    rows = campaign_bias(config, recommenders={"g1": "constant_agreeing",
                                               "g2": "constant_disagreeing"},
                         ticks=ticks, p_values=P_VALUES, n_samples=None, rng=0)
    s = {key: r.estimate for key, r in table(rows).items()}
    assert s["g1", "unweighted", 500] >= 1.15 * s["g1", "unweighted", 300]
    assert s["g2", "unweighted", 500] <= 0.85 * s["g2", "unweighted", 300]
    for g in ("g1", "g2"):
        for t in ticks:
            assert abs(s[g, "weighted_pall", t] / s[g, "unweighted", 300] - 1) <= 0.03, (g, t)
            assert abs(s[g, "weighted_pall", t] / s[g, "twin", t] - 1) <= 0.03, (g, t)
    # nested selections: reweighting more items never leaves a larger divergence
    kl = table(rows, "kl")
    for t in ticks:
        d = [kl["item_weights", v, t].estimate for v in
             ["unweighted"] + ["weighted_pall" if p is None else f"weighted_p{p}"
                               for p in P_VALUES]]
        # adjacent pairs: d[1:] is one shorter on purpose
        assert all(a >= b - 1e-12 for a, b in zip(d, d[1:], strict=False)), (t, d)
    # g1's items are the ones the campaigns moved most, so the first items selected (largest
    # |P_ref(i) - P_cur(i)|) fix g1; g2's items only lose share by dilution, which is undone
    # only once every pushed item is reweighted. (viadeo_like at this size: g1 from p = 5,
    # g2 from p = 10 or 20.)
    p1 = smallest_stabilising_p(s, "g1", ticks)
    p2 = smallest_stabilising_p(s, "g2", ticks)
    assert P_VALUES.index(p1) < P_VALUES.index(p2), (p1, p2)


@pytest.fixture(scope="module")
def small_run():
    class Mine:  # a user-supplied recommender instance: popularity without filtering
        def fit(self, profiles):
            self.order = np.argsort(-np.asarray(sp.csr_array(profiles).sum(axis=0)),
                                    kind="stable")
            return self

        def recommend(self, users, k, *, removed=None):
            return np.tile(self.order[:k], (len(users), 1))

    mine = Mine()
    config = simulator.preset("viadeo_like", n_users=1200)
    recs = dict(KINDS, popularity="popularity", mine=mine)
    rows = campaign_bias(config, recommenders=recs, ticks=(500, 300), p_values=(0, 5, None),
                         n_samples=400, rng=7)
    return config, rows, mine


def test_rows_are_named_as_the_scenario_expects(small_run):
    _, rows, _ = small_run
    assert all(isinstance(r, Measurement) and r.evaluation == "offline_bias" for r in rows)
    scored = {"g1", "g2", "user_cosine_cf", "naive_cf", "popularity", "mine"}
    assert {r.agent for r in rows} == scored | {"item_weights", "world"}
    variants = {"unweighted", "weighted_p0", "weighted_p5", "weighted_pall", "twin"}
    for metric in ("loo_hit@5", "loo_hit@5_sampled"):
        got = table(rows, metric)
        assert set(got) == {(a, v, t) for a in scored for v in variants for t in (300, 500)}
    exact, sampled = table(rows), table(rows, "loo_hit@5_sampled")
    for key, r in exact.items():
        twin = exact[key[0], "twin", key[2]].estimate
        assert r.truth == twin and r.stderr == 0.0 and r.ci_low == r.ci_high == r.estimate
        s = sampled[key]
        assert s.n == 400 and s.truth == twin and s.ci_low <= s.estimate <= s.ci_high
    # p = 0 reweights nothing; at the reference tick weighting changes nothing
    for a in scored:
        for t in (300, 500):
            assert exact[a, "weighted_p0", t].estimate == exact[a, "unweighted", t].estimate
        assert math.isclose(exact[a, "weighted_pall", 300].estimate,
                            exact[a, "unweighted", 300].estimate, rel_tol=1e-9)


def test_bias_decomposition_adds_up(small_run):
    _, rows, _ = small_run
    exact = table(rows)
    sel, struct = table(rows, "loo_hit@5_selection_bias"), table(rows, "loo_hit@5_structural_bias")
    for (a, v, t), r in sel.items():
        assert v == "bias"
        total = exact[a, "unweighted", t].estimate - exact[a, "twin", t].estimate
        assert math.isclose(r.estimate + struct[a, v, t].estimate, total, abs_tol=1e-12)
        assert math.isclose(r.estimate, exact[a, "unweighted", t].estimate
                            - exact[a, "weighted_pall", t].estimate, abs_tol=1e-15)
    # the campaigns bias the CF scores at the end of the window; weighting changes them
    for a in ("user_cosine_cf", "naive_cf"):
        assert exact[a, "unweighted", 500].estimate != exact[a, "twin", 500].estimate
        assert abs(sel[a, "bias", 500].estimate) > 0


def test_weights_and_marginal_diagnostics(small_run):
    config, rows, _ = small_run
    kl = table(rows, "kl")
    for t in (300, 500):
        assert kl["item_weights", "weighted_pall", t].estimate <= \
            kl["item_weights", "unweighted", t].estimate
    assert kl["item_weights", "unweighted", 300].estimate == 0.0
    assert kl["item_weights", "unweighted", 500].estimate > 0.01
    marg = [r for r in rows if r.metric == "item_marginal"]
    pushed = set().union(*(c.items for c in config.campaigns))
    assert marg and {int(r.variant[4:]) for r in marg} <= pushed
    # campaigns push P_t(i) above the twin's by the end of the window
    assert all(r.estimate > r.truth for r in marg if r.tick == 500)


def test_instances_are_copied_not_fitted_in_place(small_run):
    _, _, mine = small_run
    assert not hasattr(mine, "order")
    cf = agents.UserCosineCF()
    campaign_bias(simulator.preset("viadeo_like", n_users=300), recommenders={"cf": cf},
                  ticks=(300,), p_values=(), n_samples=None, rng=1)
    with pytest.raises(RuntimeError):
        cf.recommend([0], 1)  # still unfitted


def test_sampling_streams_are_keyed_by_identity(small_run):
    config, rows, _ = small_run
    alone = campaign_bias(config, recommenders={"g2": "constant_disagreeing"}, ticks=(300, 500),
                          p_values=(0, 5, None), n_samples=400, rng=7)
    a, b = table(rows, "loo_hit@5_sampled"), table(alone, "loo_hit@5_sampled")
    for key, r in b.items():
        assert r == a[key]


def test_figures(small_run, tmp_path):
    config, rows, _ = small_run
    paths = plot_campaign_bias(rows, tmp_path / "fig",
                               campaign_ticks=[c.start for c in config.campaigns])
    names = {p.name for p in paths}
    assert "campaign_bias_g1.png" in names and "campaign_bias_marginals.png" in names
    # the figure of record (every recommender), one per recommender, the marginals
    assert paths[0].name == "campaign_bias__scores.png" and len(paths) == 8
    for p in paths:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


_CFG = simulator.preset("viadeo_like", n_users=200)


@pytest.mark.parametrize("kwargs, exc, match", [
    pytest.param({"recommenders": {}}, TypeError, r"`recommenders` must be a non-empty mapping",
                 id="empty"),
    pytest.param({"recommenders": {"x": "knn"}}, ValueError,
                 r"`recommenders\['x'\]` must be one of .*got 'knn'", id="unknown-kind"),
    pytest.param({"recommenders": {"x": object()}}, TypeError,
                 r"`recommenders\['x'\]` must be a kind name or an object with", id="not-a-rec"),
    pytest.param({"ticks": ()}, ValueError, r"`ticks` must hold at least one tick", id="no-ticks"),
    pytest.param({"p_values": (5, -1)}, ValueError, r"`p_values` must hold integers >= 0.*-1",
                 id="p<0"),
    pytest.param({"k": 0}, ValueError, r"`k` must be an integer >= 1; got 0", id="k=0"),
    pytest.param({"n_samples": 0}, ValueError, r"`n_samples` must be an integer >= 1",
                 id="n_samples=0"),
    pytest.param({"rng": "seed"}, TypeError, r"`rng` must be None, an int", id="rng"),
])
def test_bad_input(kwargs, exc, match):
    args = {"recommenders": {"g1": "constant_agreeing"}, "ticks": (300,)}
    args.update(kwargs)
    with pytest.raises(exc, match=match):
        campaign_bias(_CFG, **args)


def test_constant_kind_without_campaign_in_window_names_the_recommender():
    # before the first campaign nothing was pushed: g1 cannot be built
    with pytest.raises(ValueError, match=r"`recommenders\['g1'\]` = 'constant_agreeing' cannot"):
        campaign_bias(_CFG, recommenders={"g1": "constant_agreeing"}, ticks=(100, 200))
