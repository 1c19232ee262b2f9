"""One module per workflow rule: what each job does, torch-free at import."""
