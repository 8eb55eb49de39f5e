"""Fuzzing every reader with mutated real recordings (issue 14).

``tests/fuzz/test_fuzz.py`` runs a bounded hypothesis search as part of the test suite (about a minute);
``python -m tests.fuzz --minutes N`` runs the same mutators for longer. Every case that ever broke a
promise is saved in ``tests/fixtures/bad/`` and replayed by ``test_fuzz.py`` forever after.
"""
