"""Before a run: the time model of each job (`time_model`), the requests a job sees (`workload`), the
whole run's schedule and critical path (`schedule`); after one: the time model against what its jobs
measured, and those measurements for the next plan (`calibration`).

May import: errors, store, data, judging.
"""
