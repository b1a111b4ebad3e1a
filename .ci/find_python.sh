#!/usr/bin/env bash
# Prints the path of the Python interpreter a stack needs, or explains how to get one
# and fails.
#   find_python.sh        Python 3.10, the distributed stack (requirements.lock, .venv)
#   find_python.sh core   Python 3.12, the core on a current stack (requirements-core.lock,
#                         .venv-core)
# Order: the variable ($PYTHON, or $PYTHON_CORE for core: an explicit choice wins), then
# pythonX.Y (or a python3 / python that is X.Y) on PATH, then pyenv's newest X.Y.z.
set -u
if [ "${1:-}" = core ]; then
  want=3.12 var=PYTHON_CORE target="make setup-core" what="The core on a current stack"
  why="requirements-core.lock is resolved for CPython 3.12 wheels (JAX 0.11, numpy 2)."
else
  want=3.10 var=PYTHON target="make test" what="distrl"
  why="dm-launchpad 0.5.2, its last release, has wheels for cp37-cp310 only."
fi
major=${want%.*} minor=${want#*.}
is_wanted() {
  "$1" -c "import sys; sys.exit(sys.version_info[:2] != ($major, $minor))" 2>/dev/null
}

chosen="${!var:-}"
if [ -n "$chosen" ]; then
  if is_wanted "$chosen"; then echo "$chosen"; exit 0; fi
  echo "distrl: $var=$chosen is not a Python $want interpreter." >&2
  exit 1
fi
for cand in "python$want" python3 python; do
  p="$(command -v "$cand" 2>/dev/null)" && is_wanted "$p" && { echo "$p"; exit 0; }
done
root="$(pyenv root 2>/dev/null || echo "${PYENV_ROOT:-$HOME/.pyenv}")"
for p in $(ls -d "$root"/versions/"$want".*/bin/python"$want" 2>/dev/null | sort -V -r); do
  is_wanted "$p" && { echo "$p"; exit 0; }
done
cat >&2 <<MSG
distrl: no Python $want found (looked at \$$var, python$want/python3 on PATH, and pyenv).
$what needs exactly Python $want: $why
Install one, then re-run, for example:
    pyenv install $want             # then: $target
    uv python install $want         # then: $var=\$(uv python find $want) $target
or point $var at any $want interpreter: $var=/path/to/python$want $target
MSG
exit 1
