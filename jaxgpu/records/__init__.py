"""Results as data (``results``), in words (``labels``) and as figures and tables (``figures``). Imports the
ground only; nothing here imports JAX."""
