# Shared by the scripts that build third-party binaries from Go modules into
# the cache (hack/kube.sh, hack/stack.sh). Source it after setting:
#   here  the hack/ folder
#   dir   the cache folder the binaries go to
#   name  the prefix of progress lines, e.g. "kube"

log() { printf '%s: %s\n' "$name" "$*" >&2; }

# build MODULE_DIR LDFLAGS PKG... : go build, in the module of hack/MODULE_DIR
# resolved on its own (GOWORK=off: the versions are those its go.mod pins,
# never the workspace's), into a temporary folder inside $dir, then move the
# binaries into place, so that an interrupted build never leaves a half
# binary. Shows a line of progress every 20 packages and, when
# GNU time is installed, the peak memory (RSS) of the largest compiler or
# linker process. $BUILD_FLAGS are added to go build (e.g. -p 1).
build() {
  local mod=$1; shift
  local ldflags=$1; shift
  local tmp start n timefile
  tmp=$(mktemp -d "$dir/.build.XXXXXX")
  timefile="$tmp/.time"
  start=$(date +%s)
  local timer=()
  if [ -x /usr/bin/time ]; then
    timer=(/usr/bin/time -f '%M' -o "$timefile")
  fi
  # shellcheck disable=SC2086 # BUILD_FLAGS is a list of flags
  (cd "$here/$mod" && CGO_ENABLED=0 GOWORK=off "${timer[@]}" go build -v -trimpath ${BUILD_FLAGS:-} -ldflags="$ldflags" -o "$tmp/" "$@" 2>&1) |
    while IFS= read -r line; do
      n=$((${n:-0} + 1))
      case "$line" in
        *:*) printf '%s\n' "$line" >&2 ;; # errors carry a file:line
      esac
      if [ $((n % 20)) -eq 0 ]; then
        log "  $n packages compiled, $(( $(date +%s) - start ))s elapsed"
      fi
    done
  local rc=${PIPESTATUS[0]}
  if [ "$rc" -ne 0 ]; then
    rm -rf "$tmp"
    log "build failed in hack/$mod (exit $rc)"
    exit "$rc"
  fi
  local peak=""
  if [ -s "$timefile" ]; then
    peak=", peak RSS $(( $(tail -n 1 "$timefile") / 1024 )) MB"
  fi
  rm -f "$timefile"
  mv "$tmp"/* "$dir"/
  rmdir "$tmp"
  log "  done in $(( $(date +%s) - start ))s$peak"
}
