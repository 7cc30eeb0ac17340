# Shared by the scripts that build third-party binaries from Go modules into
# the cache (hack/kube.sh, hack/stack.sh) and by those that build or test
# Cluster API's source (hack/cabpk-initlock.sh, hack/cabpk-tests.sh). Source
# it after setting:
#   here  the hack/ folder
#   dir   the cache folder the binaries go to (build)
#   name  the prefix of progress lines, e.g. "kube"
#   root  the work tree, and CAPI_VERSION (capi_tree)

log() { printf '%s: %s\n' "$name" "$*" >&2; }

# build MODULE_DIR LDFLAGS PKG... : go build, in the module of hack/MODULE_DIR
# resolved on its own (GOWORK=off: the versions are those its go.mod pins,
# never the workspace's), into a temporary folder inside $dir, then move the
# binaries into place, so that an interrupted build never leaves a half
# binary. Shows a line of progress every 20 packages and, when
# GNU time is installed, the peak memory (RSS) of the largest compiler or
# linker process. $BUILD_FLAGS are added to go build (e.g. -p 1).
# Static (CGO_ENABLED=0) and without -trimpath (GOFLAGS is emptied: the
# Makefile's has it), as Cluster API's own tests must build
# (hack/cabpk-tests.sh: their envtest finds its CRDs from its source file's
# path), so that the builds of CABPK and CAPI core, of the patched CABPK and
# of its tests share one compile of their dependencies.
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
  (cd "$here/$mod" && CGO_ENABLED=0 GOFLAGS= GOWORK=off "${timer[@]}" go build -v ${BUILD_FLAGS:-} -ldflags="$ldflags" -o "$tmp/" "$@" 2>&1) |
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

# capi_tree DEST [PATCH]: a writable copy, in DEST, of Cluster API
# $CAPI_VERSION's module source as hack/capi pins it (from the module cache,
# downloaded when missing), with PATCH applied when given. The module's
# go.mod points its /api module at a folder that is not in the module zip:
# it is required at $CAPI_VERSION instead; the library a patch requires is
# this work tree's pkg/initlock ($root). Build in DEST with GOFLAGS=-mod=mod
# and GOWORK=off.
capi_tree() {
  local dest=$1 patch=${2:-} src
  src=$(cd "$here/capi" && GOFLAGS=-mod=mod GOWORK=off go mod download -json "sigs.k8s.io/cluster-api@$CAPI_VERSION" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  if [ ! -f "$src/go.mod" ]; then
    log "Cluster API $CAPI_VERSION not found in the module cache"
    return 1
  fi
  rm -rf "$dest"
  mkdir -p "$(dirname "$dest")"
  cp -r "$src" "$dest"
  chmod -R u+w "$dest"
  local edits=(-replace "sigs.k8s.io/cluster-api/api=sigs.k8s.io/cluster-api/api@$CAPI_VERSION")
  if [ -n "$patch" ]; then
    local apply=(git apply -p1)
    if command -v patch >/dev/null; then
      apply=(patch -p1 --quiet --no-backup-if-mismatch)
    fi
    if ! (cd "$dest" && "${apply[@]}" < "$patch"); then
      log "$patch does not apply to Cluster API $CAPI_VERSION"
      return 1
    fi
    edits+=(-replace "github.com/initlock/initlock/pkg/initlock=$root/pkg/initlock")
  fi
  (cd "$dest" && go mod edit "${edits[@]}")
}
