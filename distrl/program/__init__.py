"""Stage 7 of the data flow: everything that knows Launchpad.

`topology` builds the program, `launcher` runs it on this machine, `ray/` on a Ray
cluster; `lifecycle` is the nodes' lifecycle under Launchpad (the stop, a failing
node's end; `distrl.nodes.lifecycle` says what a node asks of it); `rundir`-level
helpers for the terminal (`progress`) and where servers listen (`bindhost`).
"""
