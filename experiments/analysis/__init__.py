"""What the records mean: derived figures (``derive``), the claims and their rules (``claims``, read through
``evidence``), and the prediction model's view of timed records (``prediction``). Imports no JAX, and never
the report or the measuring code."""
