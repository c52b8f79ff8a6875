"""Studies: run programs many times under each placement and keep every run (see :mod:`pinlab.study.store`)."""
