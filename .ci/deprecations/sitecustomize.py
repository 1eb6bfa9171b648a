# CI puts this folder on PYTHONPATH for the study it runs: a deprecated call made from the project's own code (a
# JAX API on its way out, say) stops the run, while one raised inside a library stays a warning. pytest applies the
# same filter from pyproject.toml's filterwarnings; a restarted process (experiments.run's allocator restart) keeps
# PYTHONPATH, so it keeps this filter too.
import warnings

warnings.filterwarnings("error", category=DeprecationWarning, module=r"(jaxgpu|experiments)")
