"""Hostile loader cases (issue 36, item 7): damaged files and impossible columns get a clear
error naming the file, the line and the column -- never a bare library exception, never a
silent wrong log. One test per case."""

import csv

import numpy as np
import pytest

from evaluators.datasets import DatasetFormatError, load_open_bandit, read_bandit_log
from simulator.logs import BanditLog
from tests.evaluators.test_real_data import _rows, _write


def _load(root):
    return load_open_bandit(root, behavior_policy="random", campaign="all")


def _csv(path, header, rows):
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)
    return path


def test_obd_duplicated_click_column_is_refused(tmp_path):
    # the first `click` all zeros, the duplicate holding the clicks: pandas took the first
    root = _write(tmp_path)
    path = root / "random" / "all" / "all.csv"
    with open(path, newline="") as fh:
        table = list(csv.reader(fh))
    col = table[0].index("click")
    table[0].append("click")
    for row in table[1:]:
        row.append(row[col])
        row[col] = "0"
    _csv(path, table[0], table[1:])
    with pytest.raises(DatasetFormatError, match=r"all\.csv:1: column 'click' appears twice"):
        _load(root)


def test_obd_non_utf8_bytes_name_file_and_line(tmp_path):
    root = _write(tmp_path)
    path = root / "random" / "all" / "all.csv"
    lines = path.read_bytes().split(b"\n")
    lines[4] = lines[4].replace(b",", b",\xff\xfe", 1)  # line 5 of the file
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(DatasetFormatError, match=r"all\.csv:5: not valid UTF-8"):
        _load(root)


def test_obd_non_utf8_header_names_file_and_line(tmp_path):
    root = _write(tmp_path)
    path = root / "random" / "all" / "item_context.csv"
    path.write_bytes(b"\xff" + path.read_bytes())
    with pytest.raises(DatasetFormatError, match=r"item_context\.csv:1: not valid UTF-8"):
        _load(root)


def test_obd_timestamp_minus_one_names_file_and_line(tmp_path):
    rows = _rows()
    rows[6] = dict(rows[6], timestamp="-1")
    with pytest.raises(DatasetFormatError, match=r"all\.csv:8: column 'timestamp'.*'-1'"):
        _load(_write(tmp_path, rows))


def test_obd_huge_position_is_refused(tmp_path):
    rows = _rows()
    rows[2] = dict(rows[2], position=2**63 - 1)
    with pytest.raises(DatasetFormatError, match=r"all\.csv:4: column 'position' must be an "
                                                 r"integer in \[1, 5\]"):
        _load(_write(tmp_path, rows))


def test_banditlog_refuses_string_propensities():
    with pytest.raises(TypeError, match=r"`pscore` must hold real numbers"):
        BanditLog(context=np.zeros((2, 1)), action=[0, 1], reward=[1.0, 0.0],
                  pscore=["0.5", "0.5"], n_actions=2)


def test_banditlog_refuses_string_rewards():
    with pytest.raises(TypeError, match=r"`reward` must hold real numbers"):
        BanditLog(context=np.zeros((2, 1)), action=[0, 1], reward=np.array(["1", "0"]),
                  pscore=[0.5, 0.5], n_actions=2)


def test_user_log_duplicated_column_is_refused(tmp_path):
    path = _csv(tmp_path / "log.csv", ["action", "reward", "pscore", "reward"],
                [[0, 0, 0.5, 1], [1, 1, 0.5, 0]])
    with pytest.raises(DatasetFormatError, match=r"log\.csv:1: column 'reward' appears twice"):
        read_bandit_log(path)


def test_user_log_non_utf8_names_file_and_line(tmp_path):
    path = _csv(tmp_path / "log.csv", ["action", "reward", "pscore", "x"],
                [[0, 0, 0.5, "a"], [1, 1, 0.5, "b"], [1, 1, 0.5, "c"]])
    data = path.read_bytes().replace(b",c", b",\xe9t\xe9")
    path.write_bytes(data)
    with pytest.raises(DatasetFormatError, match=r"log\.csv:4: not valid UTF-8"):
        read_bandit_log(path)


def test_user_log_date_out_of_range_names_file_and_line(tmp_path):
    path = _csv(tmp_path / "log.csv", ["timestamp", "action", "reward", "pscore"],
                [["2020-01-01", 0, 0, 0.5], ["9999-01-01", 1, 1, 0.5]])
    with pytest.raises(DatasetFormatError, match=r"log\.csv:3: column 'timestamp'.*9999"):
        read_bandit_log(path)


def test_user_log_huge_position_is_refused(tmp_path):
    path = _csv(tmp_path / "log.csv", ["action", "reward", "pscore", "position"],
                [[0, 0, 0.5, 0], [1, 1, 0.5, 2**63 - 1]])
    with pytest.raises(DatasetFormatError, match=r"log\.csv:3: column 'position'"):
        read_bandit_log(path)
