"""Torch-free judging: templates, verdict parsing, answer extraction, mathematical answers compared by
Math-Verify (`mathcompare`; sympy, no torch), text normalisation, grading modes
(`modes/`), statistics, agreement with human labels (`labels`, `agreement`) and between judges (`panels`).

May import: errors, data.
"""
