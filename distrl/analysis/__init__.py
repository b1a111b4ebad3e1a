"""After (or beside) a run: plots of a run directory and comparisons of several runs."""
