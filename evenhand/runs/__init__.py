"""Run directories: ``rundir.RunDir`` owns a run's layout, manifest, status and model spec; ``RunError`` is
the error every run-directory fault raises. Only ``RunDir`` builds a run file's path (tests/floor_plan.py).
"""
