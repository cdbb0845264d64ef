"""The hostile corpus (issue 36): every case a hostile trial of recloop found, each a test
that feeds the hostile input and asserts what must hold. One file per area:

* ``test_report_cases.py`` -- reports: paths, links and markup in user-controlled strings;
* ``test_guest_cases.py`` -- guests: plugins that reach recloop, exit, fork, hang;
* ``test_run_cases.py`` -- run directories: forged cells, stopped workers, stray files;
* ``test_loader_cases.py`` -- loaders and logs: damaged files, impossible columns;
* ``test_selector_cases.py`` -- estimator selectors: candidates that write, lie or exit.

Cases that can hang or end a process run in a subprocess under a timeout.
"""
