# shellcheck shell=bash
# Helpers shared by scripts/test, scripts/testenv, scripts/run-local and bench/run (source it).
#
#   mkl_need_root NAME WHY [ALTERNATIVE]   exit 1 with one line saying how to run NAME, unless we are root
#   mkl_apt_get ARGS...                    apt-get, non-interactive, waiting up to 5 min for another apt or
#                                          dpkg to release its lock instead of failing at once

mkl_need_root() {
  local name=$1 why=$2 alt=${3:-}
  [[ $EUID -eq 0 ]] && return 0
  echo "$name: must run as root ($why): run it again from a root shell (su -, or sudo where installed)${alt:+; $alt}" >&2
  exit 1
}

# DPkg::Lock::Timeout makes apt-get wait for the dpkg lock (install, remove). apt-get update takes the
# lists lock, which that option does not cover (apt 2.6): it fails at once, so it is retried here.
mkl_apt_get() {
  local deadline=$((SECONDS + 300)) rc err said=0
  while :; do
    rc=0
    { err=$(DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 "$@" 2>&1 >&3 3>&-) || rc=$?; } 3>&1
    if ((rc != 0)) && ((SECONDS < deadline)) \
      && grep -qE 'Could not get lock|Unable to lock|Unable to acquire the dpkg' <<<"$err"; then
      ((said++)) || echo "apt-get: another apt or dpkg holds the lock; waiting for it (up to 5 min)" >&2
      sleep 2
      continue
    fi
    [[ -n $err ]] && printf '%s\n' "$err" >&2
    return "$rc"
  done
}
