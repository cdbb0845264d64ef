"""numba kernel of the fast exact LOO for user-based kNN (``_loo_knn.py``).

Why numba: each held-out rating scans the raters of its item (sum over items of popularity
squared: 1.7e7 candidates on MovieLens 100K, ~1e9 on the synthetic 1M shape), corrects the
pair sums in O(1) and keeps a running top-k with ties broken by user index. A numpy version
(blocks per item, ``np.ix_`` gathers from dense users x users pair-sum matrices built with
sparse products) measured ~190 ns per candidate plus ~50 s of sparse products and 2 GB on the
1M shape; this loop accumulates the pair sums per held-out user in O(n_users) memory and costs
a few ns per candidate. It releases the GIL (``nogil``): the caller runs chunks of users in
threads, which costs no parallel-compilation time (``parallel=True`` took 10-20 s to compile
on the shared machine). Each held-out rating is computed from read-only inputs by one call
and written at its own position, so the threading does not change a bit of the output.

Lazy: importing this module imports no numba; the first access to ``loo_users`` compiles it
(:mod:`recloop_base.kernels`); its plain Python version is ``loo_users.py_func``.

Similarity codes: 0 pearson, 1 cosine, 2 adjusted_cosine, 3 pearson_corated,
4 cosine_corated (the order of ``SIMILARITIES``).
"""

from __future__ import annotations

import math

import numpy as np

from recloop_base.kernels import LazyKernels

__all__ = ["centred_sums", "loo_users"]

_KERNELS = LazyKernels(globals())


@_KERNELS.kernel
def loo_users(held, out_off, u_ptr, u_item, u_rating, u_dev, i_ptr, i_user, i_rating, i_dev,
              allowed, cnt_u, sum_u, sq_u, dev_sq_u, cnt_i, sum_i, mean_i,
              code, k, min_support, zero_rel, total, n_total,
              pred, n_nb, kind):  # pragma: no cover - compiled; py_func runs in the tests
    """Exact LOO prediction of every rating of the users in ``held``; writes pred/n_nb/kind.

    ``u_*``: ratings by user (CSR, items ascending); ``i_*``: ratings by item (CSC, raters
    ascending); ``*_dev``: deviation of each rating from its full-data item mean (adjusted
    cosine only; any array otherwise, never read). The ratings of ``held[h]`` are written in
    its CSR order at ``pred[out_off[h]:]`` (and ``n_nb``, ``kind``): the caller chooses a
    compact block per chunk of users, so a partition of users needs outputs of its own size
    only.

    For each held-out user u, one pass over the raters of u's items accumulates the running
    sums over ``I_u ∩ I_v`` for every v at once (count, sum r_ui r_vi, sums and sums of
    squares of either side, sum of deviation products): the pair sums of Zhang et al.
    (2016), O(sum_{i in I_u} |raters(i)|) per user and O(n_users) memory per thread.
    """
    scale = 10.0 ** 10  # rounding to 10 decimals exactly as np.round(x, 10)
    n_users = cnt_u.size
    for h in range(held.size):
        u = held[h]
        top_key = np.empty(k)
        top_sim = np.empty(k)
        top_dev = np.empty(k)
        # one row of 8 per v (the 6 sums used, padded to a 64-byte cache line): the raters
        # of an item are scattered over users, so each v touches one line, not six. A fresh
        # zeroed array per user costs only the pages it touches (calloc'd memory is zeroed
        # on first touch); clearing one array row by row measured 1.9x slower.
        acc = np.zeros((n_users, 8))
        for t in range(u_ptr[u], u_ptr[u + 1]):
            ii = u_item[t]
            x = u_rating[t]
            ex = u_dev[t] if code == 2 else 0.0
            lo, hi = i_ptr[ii], i_ptr[ii + 1]
            # one loop per family, so that the inner loop carries no branch
            if code == 2:
                for q in range(lo, hi):
                    v = i_user[q]
                    acc[v, 0] += 1.0
                    acc[v, 1] += ex * i_dev[q]
            elif code == 1:
                for q in range(lo, hi):
                    v = i_user[q]
                    acc[v, 0] += 1.0
                    acc[v, 1] += x * i_rating[q]
            elif code == 4:
                xx = x * x
                for q in range(lo, hi):
                    v = i_user[q]
                    y = i_rating[q]
                    acc[v, 0] += 1.0
                    acc[v, 1] += x * y
                    acc[v, 4] += xx
                    acc[v, 5] += y * y
            else:
                xx = x * x
                for q in range(lo, hi):
                    v = i_user[q]
                    y = i_rating[q]
                    acc[v, 0] += 1.0
                    acc[v, 1] += x * y
                    acc[v, 2] += x
                    acc[v, 3] += y
                    acc[v, 4] += xx
                    acc[v, 5] += y * y
        nu_all = cnt_u[u]
        base = out_off[h] - u_ptr[u]
        for t in range(u_ptr[u], u_ptr[u + 1]):
            kk = u_item[t]
            a = u_rating[t]
            pos = base + t
            others = nu_all - 1.0
            if others == 0.0:
                pred[pos] = (total - a) / (n_total - 1) if n_total > 1 else np.nan
                n_nb[pos] = 0
                kind[pos] = 2
                continue
            tu = sum_u[u] - a
            mean_rest = tu / others
            mean_k = mean_k_new = euk = eu = du_adj = 0.0
            if code == 2:
                mean_k = mean_i[kk]
                euk = a - mean_k
                mean_k_new = (sum_i[kk] - a) / (cnt_i[kk] - 1.0) if cnt_i[kk] > 1.0 else np.nan
                eu = dev_sq_u[u]
                du_adj = eu - euk * euk
            n_top = 0
            for q in range(i_ptr[kk], i_ptr[kk + 1]):
                v = i_user[q]
                if v == u or not allowed[v]:
                    continue
                nc = acc[v, 0] - 1.0
                if nc < min_support:
                    continue
                b = i_rating[q]
                if code == 0 or code == 3:
                    sxy = acc[v, 1] - a * b
                    sx = acc[v, 2] - a
                    sy = acc[v, 3] - b
                    sxx = acc[v, 4] - a * a
                    syy = acc[v, 5] - b * b
                    if code == 0:
                        nu = others
                        nv = cnt_u[v]
                        tv = sum_u[v]
                        num = nu * nv * sxy - nu * tv * sx - tu * nv * sy + nc * tu * tv
                        nu2 = nu * nu
                        tu2 = nc * tu * tu
                        du = nu2 * sxx - 2.0 * nu * tu * sx + tu2
                        mu = nu2 * sxx + tu2
                        nv2 = nv * nv
                        tv2 = nc * tv * tv
                        dv = nv2 * syy - 2.0 * nv * tv * sy + tv2
                        mv = nv2 * syy + tv2
                    else:
                        num = nc * sxy - sx * sy
                        du = nc * sxx - sx * sx
                        dv = nc * syy - sy * sy
                        mu = nc * sxx
                        mv = nc * syy
                    # the running sums lose digits when a factor is a small difference of
                    # large sums (ratings far from their mean, nearly equal over C): below a
                    # thousandth of its magnitude (and above the zero rule's threshold, which
                    # drops it anyway), compute the factors again over C from centred
                    # ratings, as the definition does (a similarity off by 1e-10 can flip a
                    # tie at the 10th decimal: issue 33)
                    if (du > zero_rel * mu and dv > zero_rel * mv
                            and (du <= 1e-3 * mu or dv <= 1e-3 * mv)):
                        if code == 0:
                            cxy, cxx, cyy = centred_sums(u, v, kk, u_ptr, u_item, u_rating,
                                                         mean_rest, sum_u[v] / cnt_u[v], False)
                            num = nu * nv * cxy
                            du = nu2 * cxx
                            dv = nv2 * cyy
                        else:
                            cxy, cxx, cyy = centred_sums(u, v, kk, u_ptr, u_item, u_rating,
                                                         0.0, 0.0, True)
                            num = nc * cxy
                            du = nc * cxx
                            dv = nc * cyy
                elif code == 1:
                    num = acc[v, 1] - a * b
                    mu = sq_u[u]
                    du = mu - a * a
                    dv = sq_u[v]
                    mv = dv
                elif code == 4:
                    num = acc[v, 1] - a * b
                    mu = acc[v, 4]
                    mv = acc[v, 5]
                    du = mu - a * a
                    dv = mv - b * b
                else:
                    evk = b - mean_k
                    evk_new = b - mean_k_new
                    num = acc[v, 1] - euk * evk
                    du = du_adj
                    mu = eu
                    ev = dev_sq_u[v]
                    dv = ev - evk * evk + evk_new * evk_new
                    mv = ev + evk_new * evk_new
                # sim > 0 needs num > 0 (the denominator is positive): most candidates
                # with no chance of being kept stop before the square root
                if not num > 0.0 or du <= zero_rel * mu or dv <= zero_rel * mv:
                    continue
                sim = num / math.sqrt(du * dv)
                key = np.rint(sim * scale) / scale
                if not key > 0.0:
                    continue
                # candidates arrive by increasing user index: an equal key ranks after
                # the ones kept, so only a strictly larger key displaces the last one
                if n_top == k and not key > top_key[k - 1]:
                    continue
                j = n_top if n_top < k else k - 1
                while j > 0 and top_key[j - 1] < key:
                    top_key[j] = top_key[j - 1]
                    top_sim[j] = top_sim[j - 1]
                    top_dev[j] = top_dev[j - 1]
                    j -= 1
                top_key[j] = key
                top_sim[j] = sim
                top_dev[j] = b - sum_u[v] / cnt_u[v]
                if n_top < k:
                    n_top += 1
            if n_top == 0:
                pred[pos] = mean_rest
                n_nb[pos] = 0
                kind[pos] = 1
                continue
            wsum = 0.0
            wdev = 0.0
            for j in range(n_top):
                wsum += top_sim[j]
                wdev += top_sim[j] * top_dev[j]
            pred[pos] = mean_rest + wdev / wsum
            n_nb[pos] = n_top
            kind[pos] = 0


@_KERNELS.kernel
def centred_sums(u, v, kk, u_ptr, u_item, u_rating, cx, cy, corated):  # pragma: no cover
    """``sum_C (x - cx)(y - cy)``, ``sum_C (x - cx)^2`` and ``sum_C (y - cy)^2`` over the
    co-rated items ``C = (I_u \\ {kk}) ∩ I_v`` (u's ratings x, v's ratings y), merging the two
    users' rows of the CSR arrays (items ascending); with ``corated`` the centres are C's own
    means (a first pass), else ``cx`` and ``cy``. Called for ill-conditioned candidates only."""
    lo_u, hi_u, lo_v, hi_v = u_ptr[u], u_ptr[u + 1], u_ptr[v], u_ptr[v + 1]
    if corated:
        n = 0
        sx = sy = 0.0
        p, q = lo_u, lo_v
        while p < hi_u and q < hi_v:
            if u_item[p] < u_item[q]:
                p += 1
            elif u_item[q] < u_item[p]:
                q += 1
            else:
                if u_item[p] != kk:
                    n += 1
                    sx += u_rating[p]
                    sy += u_rating[q]
                p += 1
                q += 1
        cx = sx / n
        cy = sy / n
    sxy = sxx = syy = 0.0
    p, q = lo_u, lo_v
    while p < hi_u and q < hi_v:
        if u_item[p] < u_item[q]:
            p += 1
        elif u_item[q] < u_item[p]:
            q += 1
        else:
            if u_item[p] != kk:
                dx = u_rating[p] - cx
                dy = u_rating[q] - cy
                sxy += dx * dy
                sxx += dx * dx
                syy += dy * dy
            p += 1
            q += 1
    return sxy, sxx, syy


__getattr__ = _KERNELS.install()  # compiled on first access (recloop_base.kernels)
