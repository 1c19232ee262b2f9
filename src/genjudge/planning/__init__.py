"""Before a run: the time model of each job (`time_model`, with the devices and models it reads in
`hardware`, the engines' own terms in `engines`, constants measured on GPUs in `gpu_constants`, and the
batch `batch_size: auto` runs in `batch_choice`), the requests a job sees (`workload`), the
whole run's schedule and critical path (`schedule`); after one: the time model against what its jobs
measured, and those measurements for the next plan (`calibration`).

May import: errors, store, data, judging.
"""
