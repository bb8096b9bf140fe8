# shellcheck shell=bash
# Sourced by the build.sh of the Python-based test images (grpc-health, cluster-dns).
#
#   python_rootfs ROOTFS PYTHON SITE_PACKAGES PKG...
#
# Assembles ROOTFS offline: PYTHON as /usr/bin/python3, its stdlib without what a small server never imports
# (tests, GUIs, installers, build config), its extension modules, each PKG (a package directory or module
# file) copied from SITE_PACKAGES to /usr/lib/python3/dist-packages (where Debian's interpreter looks), and
# the shared libraries of the interpreter and of every extension module at the paths ldd prints.

python_rootfs() {
  local r=$1 py=$2 site=$3
  shift 3
  local pyver stdlib dynload dest_stdlib dest_site pkg f
  pyver=$("$py" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
  stdlib=$("$py" -c 'import sysconfig; print(sysconfig.get_path("stdlib"))')
  dynload=$("$py" -c 'import sysconfig; print(sysconfig.get_path("platstdlib"))')/lib-dynload

  mkdir -p "$r"/{usr/bin,tmp,etc,proc,sys,dev}
  chmod 1777 "$r/tmp"
  cp -L "$py" "$r/usr/bin/python3"
  dest_stdlib=$r/usr/lib/python$pyver
  mkdir -p "$dest_stdlib"
  tar -C "$stdlib" \
    --exclude=./test --exclude=./idlelib --exclude=./tkinter --exclude=./turtledemo \
    --exclude=./ensurepip --exclude=./lib2to3 --exclude=./pydoc_data --exclude=./distutils \
    --exclude='./config-*' --exclude=./site-packages --exclude=./dist-packages \
    --exclude=./lib-dynload --exclude='__pycache__' -c . | tar -C "$dest_stdlib" -x
  dest_site=$r/usr/lib/python3/dist-packages
  mkdir -p "$dest_stdlib/lib-dynload" "$dest_site"
  cp -L "$dynload"/*.so "$dest_stdlib/lib-dynload/"
  for pkg in "$@"; do
    cp -rL "$site/$pkg" "$dest_site/"
  done
  find "$r/usr/lib" -name __pycache__ -prune -exec rm -rf {} +

  local -a libs
  mapfile -t libs < <(
    { _python_rootfs_deps "$py"
      find "$r/usr/lib" -name '*.so' -print0 | while IFS= read -r -d '' so; do _python_rootfs_deps "$so"; done
    } | sort -u
  )
  for f in "${libs[@]}"; do
    [[ -n $f ]] && cp -L --parents "$f" "$r/"
  done
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$r/etc/passwd"
  printf 'root:x:0:\nnobody:x:65534:\n' >"$r/etc/group"
}

_python_rootfs_deps() { ldd "$1" 2>/dev/null | awk '/=> \// { print $3 } /^[[:space:]]*\/[^ ]+ \(/ { print $1 }'; }
