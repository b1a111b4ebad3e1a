"""Stage 6 of the data flow: the node classes Launchpad runs, each a thin loop over layers 3-5."""
