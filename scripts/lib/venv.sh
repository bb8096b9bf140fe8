# shellcheck shell=bash
# The project's virtualenv, shared by scripts/test, scripts/run-local and bench/run (source it, then call):
#
#   mkl_venv_ready [EXTRAS]   make .venv usable and the project installed in it (pip install -e '.[EXTRAS]')
#
# Creates .venv when it has no working interpreter, and installs the project when pyproject.toml, the Python
# version or the wanted extras changed since the last install that succeeded (stamp: .venv/.mkl-install-stamp,
# "<hash> <extras>"). The stamp is removed before pip runs and written only after pip succeeded, so an
# install that failed (network, disk, a bad pin) is retried by the next run instead of leaving a venv that
# is never repaired. Returns non-zero, with a one-line reason, when anything fails.
# Run from the repository root (the caller cd's there). MKL_VENV overrides the directory (default .venv);
# MKL_VENV_VERBOSE=1 lets pip print its progress.

mkl_venv_ready() {
  local extras=${1:-} venv=${MKL_VENV:-.venv}
  local stamp=$venv/.mkl-install-stamp want have_hash have_extras e spec=.

  if ! "$venv/bin/python" -c 'import sys' >/dev/null 2>&1; then
    if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
      echo "venv: python3 cannot create a virtualenv here; as root: apt-get install python3-venv" >&2
      return 1
    fi
    echo "venv: creating $venv" >&2
    rm -rf "$venv"
    python3 -m venv "$venv" || { echo "venv: python3 -m venv $venv failed" >&2; rm -rf "$venv"; return 1; }
  fi

  want=$( { cat pyproject.toml; "$venv/bin/python" --version 2>&1; } | sha256sum | cut -c1-32)
  have_hash='' have_extras=''
  if [[ -f $stamp ]]; then read -r have_hash have_extras <"$stamp" || true; fi
  if [[ $have_hash == "$want" ]]; then
    # Up to date when every wanted extra was installed (an install with [test] also serves a plain one).
    local missing=0
    for e in ${extras//,/ }; do
      [[ ,$have_extras, == *",$e,"* ]] || missing=1
    done
    ((missing)) || return 0
  fi

  [[ -n $extras ]] && spec=".[$extras]"
  echo "venv: installing the project into $venv (pip install -e '$spec'; needs the PyPI index)" >&2
  rm -f "$stamp"
  # MKL_VENV_VERBOSE=1 (scripts/run-local): pip names each package as it goes, instead of a minute of silence
  local quiet=(-q)
  [[ ${MKL_VENV_VERBOSE:-0} == 1 ]] && quiet=()
  if ! "$venv/bin/python" -m pip install "${quiet[@]}" -e "$spec"; then
    echo "venv: pip install -e '$spec' failed (see above); the next run tries again" >&2
    return 1
  fi
  echo "$want $extras" >"$stamp"
}
