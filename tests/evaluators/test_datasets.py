import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evaluators import datasets as D
from evaluators.datasets import DatasetFormatError


def write(tmp_path, name, text, newline="\n"):
    p = tmp_path / name
    p.write_bytes(text.replace("\n", newline).encode())
    return p


def check_maps(data, raw_users, raw_items, raw_ratings):
    """Indices are contiguous, 0-based, in file order, and map back to the raw ids."""
    assert data.users.dtype == np.int64 and data.items.dtype == np.int64
    assert data.ratings.dtype == np.float64
    np.testing.assert_array_equal(data.user_ids[data.users], raw_users)
    np.testing.assert_array_equal(data.item_ids[data.items], raw_items)
    np.testing.assert_array_equal(data.ratings, raw_ratings)
    assert set(data.users.tolist()) == set(range(data.n_users))
    assert set(data.items.tolist()) == set(range(data.n_items))
    assert np.all(data.user_ids[1:] > data.user_ids[:-1])  # increasing original ids
    assert np.all(data.item_ids[1:] > data.item_ids[:-1])
    for a in (data.users, data.items, data.ratings, data.user_ids, data.item_ids):
        assert not a.flags.writeable


def test_movielens_100k(tmp_path):
    p = write(tmp_path, "u.data", "196\t242\t3\t881250949\n186\t302\t3\t891717742\n"
                                  "22\t377\t1\t878887116\n196\t377\t5\t1\n")
    d = D.load_movielens_100k(p)
    assert (d.n_users, d.n_items, d.n_ratings, len(d)) == (3, 3, 4, 4)
    check_maps(d, [196, 186, 22, 196], [242, 302, 377, 377], [3, 3, 1, 5])
    np.testing.assert_array_equal(d.timestamps, [881250949, 891717742, 878887116, 1])
    assert d.source == str(p)
    u, i, r = d.triple()
    m = d.to_csr()
    assert m.shape == (3, 3) and m[u[3], i[3]] == 5


def test_movielens_1m(tmp_path):
    p = write(tmp_path, "ratings.dat", "1::1193::5::978300760\n1::661::3::978302109\n"
                                       "2::1193::4::978298413\n")
    d = D.load_movielens_1m(p)
    check_maps(d, [1, 1, 2], [1193, 661, 1193], [5, 3, 4])
    assert d.timestamps.tolist() == [978300760, 978302109, 978298413]


def test_jester_csv_and_text_agree_and_keep_zero_ratings(tmp_path):
    csv_ = write(tmp_path, "j.csv", "userId,jokeId,rating\n1,5,0.219\n1,7,-9.281\n2,5,0\n"
                                    "3,8,10\n", newline="\r\n")
    txt = write(tmp_path, "jester_ratings.dat", "1\t\t5\t\t0.219\n1\t\t7\t\t-9.281\n"
                                               "2\t\t5\t\t0\n3 8 10")
    a, b = D.load_jester(csv_), D.load_jester(txt)
    check_maps(a, [1, 1, 2, 3], [5, 7, 5, 8], [0.219, -9.281, 0.0, 10.0])
    assert a.timestamps is None
    for f in ("users", "items", "ratings", "user_ids", "item_ids"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f))
    assert a.to_csr().nnz == 4  # the rating 0 is a stored entry
    assert D.load_jester(txt, format="text").n_ratings == 4
    bom = tmp_path / "bom.csv"
    bom.write_bytes(b"\xef\xbb\xbf" + csv_.read_bytes())  # spreadsheet exports add one
    np.testing.assert_array_equal(D.load_jester(bom).ratings, a.ratings)


def test_generic_csv_with_names_positions_and_string_ids(tmp_path):
    p = write(tmp_path, "r.csv", 'when;who;what;score\n10;alice;"x;1";4.5\n'
                                 "11;bob;y;2\n12;alice;y;3\n")
    d = D.load_csv(p, user="who", item="what", rating="score", timestamp="when", delimiter=";")
    check_maps(d, ["alice", "bob", "alice"], ["x;1", "y", "y"], [4.5, 2, 3])
    assert d.user_ids.dtype.kind == "U" and d.timestamps.tolist() == [10, 11, 12]
    q = write(tmp_path, "r2.csv", "7,1,4\n8,01,2\n")
    e = D.load_csv(q, user=0, item=1, rating=2, header=False)
    assert e.user_ids.dtype == np.int64 and e.user_ids.tolist() == [7, 8]
    assert e.item_ids.tolist() == ["01", "1"]  # "01" is not silently merged with "1"


@st.composite
def rating_tables(draw):
    n = draw(st.integers(1, 40))
    pairs = draw(st.lists(st.tuples(st.integers(1, 30), st.integers(1, 50)), min_size=n,
                          max_size=n, unique=True))
    ratings = draw(st.lists(st.integers(1, 5), min_size=n, max_size=n))
    times = draw(st.lists(st.integers(0, 2**40), min_size=n, max_size=n))
    return pairs, ratings, times


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(table=rating_tables(), blank=st.booleans())
def test_round_trip_fast_and_exact_parsers_agree(tmp_path, table, blank):
    # A blank line sends the loader to the exact line-by-line parser; without it numpy's
    # parser runs. Both must give the same arrays.
    pairs, ratings, times = table
    lines = [f"{u}\t{i}\t{r}\t{t}" for (u, i), r, t in zip(pairs, ratings, times, strict=True)]
    if blank:
        lines.insert(len(lines) // 2, "")
    p = write(tmp_path, "u.data", "\n".join(lines) + "\n")
    d = D.load_movielens_100k(p)
    check_maps(d, [u for u, _ in pairs], [i for _, i in pairs], ratings)
    np.testing.assert_array_equal(d.timestamps, times)
    q = write(tmp_path, "ratings.dat", "\n".join(lines).replace("\t", "::") + "\n")
    e = D.load_movielens_1m(q)
    for f in ("users", "items", "ratings", "timestamps", "user_ids", "item_ids"):
        np.testing.assert_array_equal(getattr(d, f), getattr(e, f))


def test_well_formed_files_take_the_vectorised_path(tmp_path, monkeypatch):
    import evaluators._datasets as impl

    def exact_parser_called(*args, **kwargs):
        raise AssertionError("the line-by-line parser ran on a well-formed file")

    monkeypatch.setattr(impl, "_split_rows", exact_parser_called)
    assert D.load_movielens_100k(write(tmp_path, "u.data", "1\t2\t3\t4\n")).n_ratings == 1
    assert D.load_movielens_1m(write(tmp_path, "r.dat", "1::2::3::4\n")).n_ratings == 1
    assert D.load_jester(write(tmp_path, "j.csv", "userId,jokeId,rating\n1,2,0\n")).n_ratings == 1
    assert D.load_jester(write(tmp_path, "j.dat", "1 2 -3.5\n")).n_ratings == 1


@pytest.mark.parametrize("loader, text, match", [
    pytest.param(D.load_movielens_100k, "1\t2\t3\t4\n1\t2\t3\n",
                 r"u.data:2: expected 4 fields separated by '\\t'; got 3", id="ml-fields"),
    pytest.param(D.load_movielens_100k, "1\t2\t3\t4\nx\t2\t3\t4\n",
                 r"u.data:2: user id must be an integer; got 'x'", id="ml-user"),
    pytest.param(D.load_movielens_100k, "1\t2\t3\t4\n\n5\t2\tabc\t4\n",
                 r"u.data:3: rating must be a number; got 'abc'", id="ml-rating-after-blank"),
    pytest.param(D.load_movielens_100k, "1\t2\t3\t4\n2\t2\t6\t4\n",
                 r"u.data:2: rating must be in \[1, 5\]; got 6", id="ml-range"),
    pytest.param(D.load_movielens_100k, "1\t2\tnan\t4\n",
                 r"u.data:1: rating must be finite; got nan", id="ml-nan"),
    pytest.param(D.load_movielens_100k, "1\t2\t3\t4\n3\t3\t3\t3\n1\t2\t4\t5\n",
                 r"u.data:3: duplicate rating of \(user 1, item 2\); first given on line 1",
                 id="ml-duplicate"),
    pytest.param(D.load_movielens_100k, "1\t2\t3\t4.5\n",
                 r"u.data:1: timestamp must be an integer; got '4.5'", id="ml-timestamp"),
    pytest.param(D.load_movielens_100k, "\n\n", r"u.data: no ratings found", id="ml-empty"),
    pytest.param(D.load_movielens_1m, "1::2::3::4\n1:::3::3::4\n",
                 r"ratings.dat:2: (expected 4 fields|item id must be an integer)",
                 id="ml1m-separator"),
    pytest.param(D.load_movielens_1m, "1::2::3::4\n1\t3\t3\t4\n",
                 r"ratings.dat:2: expected 4 fields separated by '::'; got 1", id="ml1m-tabs"),
    pytest.param(D.load_jester, "userId,jokeId,rating\n1,2,3\n1,3,99\n",
                 r"j.csv:3: rating must be in \[-10, 10\]; got 99", id="jester-99"),
    pytest.param(D.load_jester, "user,joke,rating\n1,2,3\n",
                 r"j.csv:1: expected the header 'userId,jokeId,rating'", id="jester-header"),
    pytest.param(D.load_jester, "userId,jokeId,rating\n1,2\n",
                 r"j.csv:2: expected 3 fields separated by ','; got 2", id="jester-fields"),
])
def test_malformed_files_name_file_and_line(tmp_path, loader, text, match):
    name = {D.load_movielens_100k: "u.data", D.load_movielens_1m: "ratings.dat",
            D.load_jester: "j.csv"}[loader]
    p = write(tmp_path, name, text)
    with pytest.raises(DatasetFormatError, match=match):
        loader(p)


def test_bad_arguments(tmp_path):
    p = write(tmp_path, "r.csv", "u,i,r\n1,2,3\n1,3\n")
    with pytest.raises(DatasetFormatError,
                       match=r"r.csv:3: expected 3 fields \(as in the header\)"):
        D.load_csv(p, user="u", item="i", rating="r")
    with pytest.raises(ValueError, match=r"`rating` = 'score' is not a column of .*r.csv"):
        D.load_csv(p, user="u", item="i", rating="score")
    with pytest.raises(TypeError, match=r"`user` must be a column name \(str\) when header=True"):
        D.load_csv(p, user=0, item="i", rating="r")
    with pytest.raises(TypeError, match=r"`item` must be a 0-based column position"):
        D.load_csv(p, user=0, item="i", rating=2, header=False)
    with pytest.raises(ValueError, match=r"columns must be distinct"):
        D.load_csv(p, user="u", item="u", rating="r")
    with pytest.raises(ValueError, match=r"`delimiter` must be a single character; got '::'"):
        D.load_csv(p, user="u", item="i", rating="r", delimiter="::")
    q = write(tmp_path, "s.csv", "u,i,r\n1,2,7\n")
    with pytest.raises(DatasetFormatError, match=r"s.csv:2: rating must be in \[1, 5\]; got 7"):
        D.load_csv(q, user="u", item="i", rating="r", rating_range=(1, 5))
    with pytest.raises(ValueError, match=r"`format` must be 'csv' or 'text'; got 'xls'"):
        D.load_jester(q, format="xls")
    with pytest.raises(TypeError, match=r"`path` must be a str or os.PathLike; got int"):
        D.load_movielens_100k(3)
    with pytest.raises(FileNotFoundError):
        D.load_movielens_100k(tmp_path / "missing.data")
    bad = tmp_path / "latin.data"
    bad.write_bytes(b"1\t2\t3\t4\n1\t\xff\t3\t4\n")
    with pytest.raises(DatasetFormatError, match=r"latin.data:2: not valid utf-8-sig"):
        D.load_movielens_100k(bad)


# -- MovieLens 10M / 20M / 25M: chunked, int32 / float32 ------------------------------------

LARGE = {"10m": (D.load_movielens_10m, "ratings.dat", "::", None),
         "20m": (D.load_movielens_20m, "ratings.csv", ",", "userId,movieId,rating,timestamp"),
         "25m": (D.load_movielens_25m, "ratings.csv", ",", "userId,movieId,rating,timestamp")}


def large_text(lines, sep, header, newline="\n", final=True):
    body = newline.join(sep.join(map(str, row)) for row in lines)
    return ((header + newline) if header else "") + body + (newline if final else "")


@st.composite
def half_star_tables(draw):
    pairs = draw(st.lists(st.tuples(st.integers(1, 300), st.integers(1, 2000)), min_size=1,
                          max_size=60, unique=True))
    stars = draw(st.lists(st.integers(1, 10), min_size=len(pairs), max_size=len(pairs)))
    times = draw(st.lists(st.integers(0, 2**31), min_size=len(pairs), max_size=len(pairs)))
    return [(u, i, s / 2, t) for (u, i), s, t in zip(pairs, stars, times, strict=True)]


@pytest.mark.parametrize("kind", sorted(LARGE))
@settings(max_examples=15, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=half_star_tables(), block=st.integers(8, 200), blank=st.booleans(),
       crlf=st.booleans(), final=st.booleans())
def test_large_movielens_loaders_read_every_block_the_same(tmp_path, monkeypatch, kind, rows,
                                                           block, blank, crlf, final):
    # tiny blocks cut lines everywhere; a blank line sends its block to the exact parser
    import evaluators._datasets as impl

    loader, name, sep, header = LARGE[kind]
    lines = list(rows)
    text = large_text(lines, sep, header, "\r\n" if crlf else "\n", final)
    if blank:
        text = text.replace("\n", "\n\n", 1) if header is None else text
    p = write(tmp_path, name, text)
    monkeypatch.setattr(impl, "_CHUNK_BYTES", block)
    d = loader(p, timestamps=True)
    assert d.users.dtype == np.int32 and d.items.dtype == np.int32
    assert d.ratings.dtype == np.float32
    np.testing.assert_array_equal(d.user_ids[d.users], [r[0] for r in rows])
    np.testing.assert_array_equal(d.item_ids[d.items], [r[1] for r in rows])
    np.testing.assert_array_equal(d.ratings, [r[2] for r in rows])
    np.testing.assert_array_equal(d.timestamps, [r[3] for r in rows])
    assert loader(p).timestamps is None
    for a in (d.users, d.items, d.ratings, d.user_ids, d.item_ids, d.timestamps):
        assert not a.flags.writeable


def test_large_loader_reads_loo_knn_ready_triples(tmp_path):
    p = write(tmp_path, "ratings.csv", "userId,movieId,rating,timestamp\n"
                                       "1,10,4.5,1\n1,11,3.0,2\n2,10,5.0,3\n2,11,0.5,4\n")
    d = D.load_movielens_25m(p)
    from evaluators import loo_knn
    res = loo_knn(d.triple(), similarity="cosine", k=1)
    np.testing.assert_array_equal(res.rating, [4.5, 3.0, 5.0, 0.5])


@pytest.mark.parametrize("kind, text, match", [
    pytest.param("25m", "userId,movieId,rating\n1,2,3\n",
                 r"ratings.csv:1: expected the header 'userId,movieId,rating,timestamp'",
                 id="header"),
    pytest.param("25m", "userId,movieId,rating,timestamp\n1,2,3,4\n1,2,3\n",
                 r"ratings.csv:3: expected 4 fields separated by ','; got 3", id="fields"),
    pytest.param("25m", "userId,movieId,rating,timestamp\n1,2,3,4\n\n1,x,3,4\n",
                 r"ratings.csv:4: movie id must be an integer; got 'x'", id="id-after-blank"),
    pytest.param("25m", "userId,movieId,rating,timestamp\n1,2,3,4\n1,3,5.5,4\n",
                 r"ratings.csv:3: rating must be in \[0.5, 5\]; got 5.5", id="range"),
    pytest.param("25m", "userId,movieId,rating,timestamp\n1,2,nan,4\n",
                 r"ratings.csv:2: rating must be a finite number; got 'nan'", id="nan"),
    pytest.param("25m", "userId,movieId,rating,timestamp\n1,2,3,4.5\n",
                 r"ratings.csv:2: timestamp must be an integer; got '4.5'", id="timestamp"),
    pytest.param("25m", "userId,movieId,rating,timestamp\n-1,2,3,4\n",
                 r"ratings.csv:2: user id must be in \[0, 2\^31\); got -1", id="negative-id"),
    pytest.param("20m", "userId,movieId,rating,timestamp\n1,2,3,4\n5,5,1,1\n\n1,2,4,5\n",
                 r"ratings.csv:5: duplicate rating of \(user 1, movie 2\); first given on "
                 r"line 2", id="duplicate"),
    pytest.param("20m", "userId,movieId,rating,timestamp\n", r"ratings.csv: no ratings found",
                 id="empty"),
    pytest.param("10m", "1::2::3::4\n1::3::3\n",
                 r"ratings.dat:2: expected 4 fields separated by '::'; got 3", id="ml10m"),
    pytest.param("10m", "1::2::3::4\n1,3,3,4\n",
                 r"ratings.dat:2: expected 4 fields separated by '::'; got 1", id="ml10m-commas"),
])
def test_large_loaders_name_file_and_line(tmp_path, monkeypatch, kind, text, match):
    import evaluators._datasets as impl

    loader, name, _, _ = LARGE[kind]
    p = write(tmp_path, name, text)
    for block in (1 << 24, 9):  # one block, and blocks that cut the lines
        monkeypatch.setattr(impl, "_CHUNK_BYTES", block)
        with pytest.raises(DatasetFormatError, match=match):
            loader(p)


def test_large_well_formed_blocks_take_the_vectorised_path(tmp_path, monkeypatch):
    import evaluators._datasets as impl

    def exact_parser_called(*args, **kwargs):
        raise AssertionError("the line-by-line parser ran on a well-formed file")

    monkeypatch.setattr(impl, "_parse_block_exact", exact_parser_called)
    p = write(tmp_path, "ratings.csv", "userId,movieId,rating,timestamp\n1,2,3.5,4\n2,2,1,5\n",
              newline="\r\n")
    assert D.load_movielens_25m(p).n_ratings == 2
    assert D.load_movielens_10m(write(tmp_path, "ratings.dat", "1::2::3.5::4")).n_ratings == 1


# -- synthetic_ratings: blocks of Gumbel keys equal the one dense draw ----------------------


def dense_reference(n_users, n_items, n_ratings, n_factors=5, rng=None):
    """The generator as first written (one (n_users, n_items) array of keys, a full sort)."""
    cap = min(n_items, max(1, int(0.7 * n_items), -(-n_ratings // n_users)))
    rng = np.random.default_rng(rng)
    base = min(20, n_ratings // n_users, cap)
    counts = np.full(n_users, base, dtype=np.int64)
    weight = rng.lognormal(0.0, 1.0, n_users)
    rest = n_ratings - int(counts.sum())
    while rest > 0:
        free = weight * (counts < cap)
        counts = np.minimum(counts + rng.multinomial(rest, free / free.sum()), cap)
        rest = n_ratings - int(counts.sum())
    logp = -np.log(np.arange(n_items) + max(1.0, n_items / 80.0))[rng.permutation(n_items)]
    keys = logp[None, :] + rng.gumbel(size=(n_users, n_items))
    order = np.argsort(-keys, axis=1)
    take = np.arange(n_items)[None, :] < counts[:, None]
    users = np.broadcast_to(np.arange(n_users)[:, None], order.shape)[take]
    items = order[take]
    srt = np.lexsort((items, users))
    users, items = users[srt].astype(np.int64), items[srt].astype(np.int64)
    b_u = rng.normal(0.0, 0.4, n_users)
    b_i = rng.normal(0.0, 0.4, n_items) + 0.3 * (logp - logp.mean()) / max(logp.std(), 1e-12)
    score = 3.5 + b_u[users] + b_i[items] + rng.normal(0.0, 0.8, users.size)
    if n_factors:
        scale = 0.6 ** 0.5 / n_factors ** 0.25
        P = rng.normal(0.0, scale, (n_users, n_factors))
        Q = rng.normal(0.0, scale, (n_items, n_factors))
        score += np.einsum("nf,nf->n", P[users], Q[items])
    return users, items, np.clip(np.rint(score), 1.0, 5.0)


@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n_users=st.integers(1, 40), n_items=st.integers(1, 40), fill=st.floats(0.01, 1.0),
       seed=st.integers(0, 2**32 - 1), key_bytes=st.sampled_from([8, 200, 1 << 25]))
def test_synthetic_ratings_equals_its_dense_reference(monkeypatch, n_users, n_items, fill,
                                                      seed, key_bytes):
    import evaluators._datasets as impl

    monkeypatch.setattr(impl, "_KEY_BYTES", key_bytes)  # blocks of one user, a few, all
    n = max(1, int(fill * n_users * n_items))
    got = D.synthetic_ratings(n_users, n_items, n, rng=seed)
    want = dense_reference(n_users, n_items, n, rng=seed)
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)


def test_synthetic_ratings_has_long_tails_and_names_bad_sizes():
    u, i, r = D.synthetic_ratings(2000, 1500, 150_000, rng=0)
    activity = np.sort(np.bincount(u))[::-1]
    popularity = np.sort(np.bincount(i, minlength=1500))[::-1]
    # MovieLens-like: the busiest 10% of users hold ~a third of the ratings, the top 10% of
    # items about half; the median user rates far fewer than the mean
    assert activity[:200].sum() > 0.25 * r.size and popularity[:150].sum() > 0.35 * r.size
    assert np.median(activity) < 0.8 * activity.mean()
    with pytest.raises(ValueError, match=r"`n_ratings` must be an int in \[1, 6\]; got 7"):
        D.synthetic_ratings(2, 3, 7)
    with pytest.raises(TypeError, match=r"`n_users` must be an int"):
        D.synthetic_ratings(2.0, 3, 1)
    from recloop.experiments._loo_cf import synthetic_ratings as from_the_experiment
    assert from_the_experiment is D.synthetic_ratings
