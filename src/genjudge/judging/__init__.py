"""Torch-free judging: templates, verdict parsing, text normalisation, statistics, grading modes."""
