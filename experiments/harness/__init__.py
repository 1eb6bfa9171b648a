"""The machinery that plans and runs cases: ``plan`` prices them, ``runner`` measures and writes records.

Imports no JAX of its own, and never the analysis or the report (tests/test_architecture.py).
"""
