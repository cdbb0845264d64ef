"""The hostile corpus (issue 36): every case a hostile trial of recloop found, each a test
that feeds the hostile input and asserts what must hold. One file per area:

* ``test_report_cases.py`` -- reports: paths, links and markup in user-controlled strings;
* ``test_guest_cases.py`` -- guests: plugins that reach recloop, exit, fork, hang;
* ``test_run_cases.py`` -- run directories: forged cells, stopped workers, stray files;
* ``test_loader_cases.py`` -- loaders and logs: damaged files, impossible columns;
* ``test_selector_cases.py`` -- estimator selectors: candidates that write, lie or exit.

Cases that can hang or end a process run in a subprocess under a timeout.

The 51 cases issue 36 found that did not hold, by the issue's items, and the tests that hold
them now (``pytest tests/hostile`` runs them all; CI runs them with the suite):

1. any local file embedded in report.html (``/proc/self/environ``, ``/etc/passwd``,
   ``../`` paths, the reader's environment through ``recloop report``, a FIFO, ``/dev/zero``):
   ``test_report_cases.py::test_report_md_renders_the_string_as_text``,
   ``::test_report_html_renders_the_string_as_text``,
   ``::test_report_html_in_a_browser_requests_and_runs_nothing`` (23 hostile strings through
   every user-controlled field each), ``::test_a_figure_is_embedded_only_from_recloops_own_png``
   (11 kinds of file), ``::test_recloop_report_of_a_received_run_embeds_none_of_the_readers_files``;
2. ``javascript:``/``data:`` links through the description, params, ``--set`` and
   environment.json, a backtick in ``--out``, newlines that start a heading or a table row,
   raw HTML in report.md: the same three string tests,
   ``::test_recloop_run_with_a_hostile_description_set_and_out_name``,
   ``::test_markdown_lines_from_elsewhere_stay_text``,
   ``::test_a_link_never_points_outside_the_run``,
   ``::test_the_policy_blocks_what_escaping_would_have_let_through`` (the CSP);
3. guests that reach recloop (a wrapped ``_mean_estimate``, a replaced ``summarize``, a
   ``chdir`` at import, forked children, the ``BaseException`` family, a
   ``threading.Timer(7, os._exit)``): ``test_guest_cases.py``, a test each;
4. a stopped worker:
   ``test_run_cases.py::test_a_stopped_worker_fails_its_cell_and_the_run_goes_on``;
5. a forged, re-hashed cell: ``test_run_cases.py::test_verify_catches_a_forged_rehashed_cell``;
6. ``select_by_twin`` without guards (writes through ``.base``, 42.0 and inverted
   intervals, all-NaN candidates, no time limit, ``sys.exit``): ``test_selector_cases.py``,
   each case for every selector;
7. loaders and small holes: ``test_loader_cases.py`` (a duplicated ``click`` column,
   non-UTF-8 bytes, timestamp -1, position 2^63 - 1, string propensities) and
   ``test_run_cases.py`` (``cells`` a file, a user's ``.notes.2024.tmp``, a run of years).
"""
