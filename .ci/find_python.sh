#!/usr/bin/env bash
# Prints the path of a Python 3.10 interpreter, or explains how to get one and fails.
# Order: $PYTHON (an explicit choice wins), python3.10 on PATH, then pyenv's 3.10.x.
set -u
is_310() { "$1" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 10))' 2>/dev/null; }

if [ -n "${PYTHON:-}" ]; then
  if is_310 "$PYTHON"; then echo "$PYTHON"; exit 0; fi
  echo "distrl: PYTHON=$PYTHON is not a Python 3.10 interpreter." >&2
  exit 1
fi
for cand in python3.10 python3 python; do
  p="$(command -v "$cand" 2>/dev/null)" && is_310 "$p" && { echo "$p"; exit 0; }
done
root="$(pyenv root 2>/dev/null || echo "${PYENV_ROOT:-$HOME/.pyenv}")"
for p in $(ls -d "$root"/versions/3.10.*/bin/python3.10 2>/dev/null | sort -V -r); do
  is_310 "$p" && { echo "$p"; exit 0; }
done
cat >&2 <<'MSG'
distrl: no Python 3.10 found (looked at $PYTHON, python3.10/python3 on PATH, and pyenv).
distrl needs exactly Python 3.10: dm-launchpad 0.5.2, its last release, has wheels for
cp37-cp310 only. Install one, then re-run, for example:
    pyenv install 3.10.13            # then: make test
    uv python install 3.10           # then: PYTHON=$(uv python find 3.10) make test
or point PYTHON at any 3.10 interpreter: PYTHON=/path/to/python3.10 make test
MSG
exit 1
