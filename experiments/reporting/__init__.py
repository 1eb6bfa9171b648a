"""The report: ``build`` turns runs into sections (each experiment's view, the ledger, the predictions) and
``render`` writes them as Markdown and HTML. Imports no JAX: a report is made wherever result folders are."""
