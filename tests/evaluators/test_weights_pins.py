"""Item weights (issue 33): the selection's documented tie rule at real ties, and every number
of an ``ItemWeights`` against an independent computation (exact fractions, dense loops).

``fit_item_weights`` selects the items "by decreasing ``|P_ref(i) - P_cur(i)|`` (ties: lower
id first)". Random graphs almost never tie, so the strategy here makes ties on purpose:
duplicated item columns (the same users hold both items, in the reference and now) have the
same marginals in exact arithmetic *and* bit for bit in floating point (the same sums in the
same order), and land at random ids, so that a duplicate sits both below and above its
original. A selection that broke ties toward the higher id changed 73 of 900 fits.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from evaluators import UnmatchedItemsWarning, fit_item_weights


@st.composite
def tied_problems(draw):
    """(R, C, twins): reference and current 0/1 profiles whose items come in groups of
    identical columns (``twins``: the groups of ids, each of two or more), shuffled ids;
    some users and items may hold nothing (unmatched items, empty profiles)."""
    n_users = draw(st.integers(1, 8))
    n_base = draw(st.integers(1, 5))
    cells = st.lists(st.booleans(), min_size=n_users * n_base, max_size=n_users * n_base)
    R0 = np.array(draw(cells)).reshape(n_users, n_base)
    C0 = np.array(draw(cells)).reshape(n_users, n_base)
    R0[0, 0] = C0[0, 0] = True  # both graphs hold an edge: the marginals exist
    copies = draw(st.lists(st.integers(1, 3), min_size=n_base, max_size=n_base))
    source = np.repeat(np.arange(n_base), copies)  # column j of the result copies source[j]
    perm = np.array(draw(st.permutations(range(source.size))))
    source = source[perm]
    R = sp.csr_array(R0[:, source].astype(np.float64))
    C = sp.csr_array(C0[:, source].astype(np.float64))
    twins = [np.flatnonzero(source == b) for b in range(n_base) if copies[b] > 1]
    return R, C, twins


def exact_marginal(D) -> list[Fraction]:
    """P(i) = sum_u P(u) D_ui / |I_u|, P(u) uniform over users holding an item: fractions."""
    D = np.asarray(D) != 0
    rows = [r for r in D if r.any()]
    out = [Fraction(0)] * D.shape[1]
    for r in rows:
        for i in np.flatnonzero(r):
            out[i] += Fraction(1, len(rows) * int(r.sum()))
    return out


def exact_gaps(R, C):
    """|P_ref(i) - P_cur(i)| with the reference mass of unmatched items (held by nobody in C)
    set to 0, the held items, and the unmatched ones; exact."""
    p_ref, p_cur = exact_marginal(R.toarray()), exact_marginal(C.toarray())
    held = (C.toarray() != 0).any(axis=0)
    unmatched = [i for i in range(len(p_ref)) if p_ref[i] > 0 and not held[i]]
    for i in unmatched:
        p_ref[i] = Fraction(0)
    return [abs(a - b) for a, b in zip(p_ref, p_cur, strict=True)], held, unmatched


def dense_kl(R, C, w):
    """D(w) = sum_{P_ref > 0, matched} P_ref log(P_ref / P_cur(.|w)) by a loop over users."""
    Rd, Cd = R.toarray() != 0, C.toarray() != 0
    p_ref = np.array([float(x) for x in exact_marginal(Rd)])
    p_ref[~Cd.any(axis=0)] = 0.0
    users = [u for u in range(Cd.shape[0]) if Cd[u].any()]
    p_cur = np.zeros(Cd.shape[1])
    for u in users:
        items = np.flatnonzero(Cd[u])
        p_cur[items] += w[items] / w[items].sum() / len(users)
    s = p_ref > 0
    return float(np.sum(p_ref[s] * np.log(p_ref[s] / p_cur[s]))) if s.any() else math.nan


@pytest.mark.filterwarnings("ignore::evaluators.UnmatchedItemsWarning")
@settings(max_examples=60)
@given(problem=tied_problems(), p_frac=st.none() | st.floats(0, 1))
def test_selection_is_by_decreasing_gap_with_ties_to_the_lower_id(problem, p_frac):
    R, C, twins = problem
    n_items = C.shape[1]
    p = None if p_frac is None else int(round(p_frac * n_items))
    fit = fit_item_weights(R, C, p=p, max_iter=3)  # the selection is made before optimising
    gaps, held, unmatched = exact_gaps(R, C)
    # the candidates (held items), ordered by decreasing exact gap, then by id
    order = sorted(np.flatnonzero(held).tolist(), key=lambda i: (-gaps[i], i))
    expected = order if p is None else order[:p]
    got = fit.selected.tolist()
    assert len(got) == len(expected)
    # equal gaps that are not twins may differ in their last bits: only the exact order is
    # asserted where the gaps differ by more than rounding, and at every exact tie of twins
    for a, b in zip(got[:-1], got[1:], strict=True):
        assert float(gaps[a]) >= float(gaps[b]) - 1e-12, (got, [float(g) for g in gaps])
    for group in twins:
        ranks = [got.index(i) for i in group if i in got]
        chosen = [i for i in group if i in got]
        assert ranks == sorted(ranks), (group.tolist(), got)  # lower id first
        if held[group[0]]:  # a cut through the group keeps its lowest ids
            assert chosen == group[:len(chosen)].tolist(), (group.tolist(), got)
    assert fit.unmatched.tolist() == unmatched


def test_the_documented_tie_rule_on_a_hand_made_tie():
    """Items 0 and 2 are held by the same users in both graphs: their gaps are equal (1/9, by
    hand: P_ref 1/9 each, P_cur 2/9 each), below item 1's (7/9 against 5/9). The order is
    1, 0, 2; p=2 cuts through the tie and keeps item 0, the lower id."""
    R = sp.csr_array(np.array([[1, 1, 1], [0, 1, 0], [0, 1, 0]], float))
    C = sp.csr_array(np.array([[1, 1, 1], [1, 1, 1], [0, 1, 0]], float))
    gaps, _, _ = exact_gaps(R, C)
    assert gaps == [Fraction(1, 9), Fraction(2, 9), Fraction(1, 9)]
    assert fit_item_weights(R, C).selected.tolist() == [1, 0, 2]
    assert fit_item_weights(R, C, p=2).selected.tolist() == [1, 0]
    # the same problem with its items renamed 1 -> 0, 0 -> 2, 2 -> 1: the twins are 1 and 2
    R2, C2 = R[:, [1, 2, 0]], C[:, [1, 2, 0]]
    assert fit_item_weights(R2, C2, p=2).selected.tolist() == [0, 1]


@pytest.mark.filterwarnings("ignore::evaluators.UnmatchedItemsWarning")
@settings(max_examples=30)
@given(problem=tied_problems(), p=st.sampled_from([None, 1, 2]))
def test_kl_before_and_after_against_a_dense_computation(problem, p):
    """kl_before = D(1) and kl_after = D(weights) by the dense loop (nan when no reference
    item is matched); kl_after never above kl_before; items not selected keep weight 1."""
    R, C, _ = problem
    p = None if p is None else min(p, C.shape[1])
    fit = fit_item_weights(R, C, p=p, max_iter=50)
    before = dense_kl(R, C, np.ones(C.shape[1]))
    after = dense_kl(R, C, np.asarray(fit.weights))
    if math.isnan(before):
        assert math.isnan(fit.kl_before) and math.isnan(fit.kl_after)
        return
    assert fit.kl_before == pytest.approx(before, rel=1e-10, abs=1e-14)
    assert fit.kl_after == pytest.approx(after, rel=1e-9, abs=1e-14)
    assert fit.kl_after <= fit.kl_before + 1e-15
    others = np.setdiff1d(np.arange(C.shape[1]), fit.selected)
    assert np.all(fit.weights[others] == 1.0)


def test_unmatched_items_are_those_of_the_reference_nobody_holds_now():
    R = sp.csr_array(np.array([[1, 0, 1, 1], [0, 1, 0, 1]], float))
    C = sp.csr_array(np.array([[1, 0, 0, 1], [1, 0, 0, 1]], float))
    with pytest.warns(UnmatchedItemsWarning, match=r"2 item\(s\) .* \[1, 2\]"):
        fit = fit_item_weights(R, C)
    assert fit.unmatched.tolist() == [1, 2]
    assert 1 not in fit.selected and 2 not in fit.selected
    assert fit.kl_before == pytest.approx(dense_kl(R, C, np.ones(4)), rel=1e-12)
