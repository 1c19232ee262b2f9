"""Torch-free judging: templates, verdict parsing, answer extraction, text normalisation, grading modes
(`modes/`), statistics, agreement with human labels (`labels`, `agreement`) and between judges (`panels`).

May import: errors, data.
"""
