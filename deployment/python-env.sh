# Sourced by the start scripts: sets `python` to the interpreter of the environment the app is installed in and
# `scripts` to the folder of that environment's console scripts (flower-supernode), or exits with one line saying how
# to point at it. Order: $PYTHON, the active virtual environment ($VIRTUAL_ENV), the
# project's .venv (made by `make setup`), python3 on PATH. Flower's installed distribution is looked up, not imported
# (its import takes seconds on a small device, at every start).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [[ -n "${PYTHON:-}" ]]; then
  python=$PYTHON
elif [[ -n "${VIRTUAL_ENV:-}" && -x "$VIRTUAL_ENV/bin/python" ]]; then
  python=$VIRTUAL_ENV/bin/python
elif [[ -x "$here/../.venv/bin/python" ]]; then
  python=$(cd "$here/.." && pwd)/.venv/bin/python
else
  python=python3
fi
if ! "$python" -c 'import importlib.metadata as m; m.version("flwr")' 2>/dev/null; then
  echo "error: $python has no Flower: activate the environment the app is installed in (source .venv/bin/activate)" \
       "or set PYTHON=/path/to/venv/bin/python" >&2
  exit 1
fi
# The interpreter's own scripts folder (a virtual or conda environment), else the user scheme's (`pip install --user`):
# never a path built from a bare `python3`.
scripts=$("$python" -c 'import os, sysconfig
for path in (sysconfig.get_path("scripts"), sysconfig.get_path("scripts", f"{os.name}_user")):
    if os.access(os.path.join(path, "flower-supernode"), os.X_OK):
        print(path)
        break')
if [[ -z "$scripts" ]]; then
  echo "error: $python has Flower but no flower-supernode in its scripts folder: reinstall the app in that" \
       "environment, or set PYTHON=/path/to/venv/bin/python" >&2
  exit 1
fi
