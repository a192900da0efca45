"""`decide calibrate`: a team's own benchmark runs in, fitted efficiency constants out.

readers (result files per format) -> fit (constants against `calc/replicas/benchmark.py`'s
predictions)
-> build/file (the calibration record) -> apply (a workload's constants replaced).
"""
