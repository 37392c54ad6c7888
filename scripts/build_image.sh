#!/usr/bin/env bash
# Build ralp's image (Containerfile) with buildah and run the bench's short job inside it.
#
#   scripts/build_image.sh [--debootstrap | --base IMAGE] [--cuda] [--no-horovod] [--no-run]
#                          [--ca-bundle FILE]
#
#   --debootstrap  make the base here: Debian bookworm with Python 3.11 from Debian's packages
#                  (debootstrap), for machines that cannot reach a container registry
#   --base IMAGE   the base image (default: the Containerfile's, python:3.11-slim-bookworm)
#   --cuda         TensorFlow's CUDA build (give a CUDA --base); cannot run without a GPU
#   --no-horovod   skip Horovod's build (modes horovod and stanza then unavailable)
#   --no-run       build only
#   --ca-bundle F  the certificates pip trusts while building (default: this machine's
#                  bundle, /etc/ssl/certs/ca-certificates.crt, where it exists), for networks
#                  whose HTTPS goes through an inspecting proxy; mounted for the build only
#
# The image is tagged localhost/ralp:latest. Storage is buildah's vfs driver and RUN steps are
# isolated with chroot, so it builds as root without a container runtime or overlay support.
# The short job is `python -m ralp.bench --backend local` (loopback; the simulated cluster's
# namespaces need more privileges than a build container has). Everything the script creates
# besides the image (the debootstrap root, working containers) is removed, also on failure.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILDAH=(buildah --storage-driver vfs)
TAG=localhost/ralp:latest
BASE_TAG=localhost/ralp-base:bookworm-python3.11
base="" debootstrap=0 tensorflow=cpu horovod=1 run=1 ca=/etc/ssl/certs/ca-certificates.crt
while [ $# -gt 0 ]; do
    case "$1" in
        --debootstrap) debootstrap=1 ;;
        --base) base=${2:?--base needs an image}; shift ;;
        --cuda) tensorflow=cuda ;;
        --no-horovod) horovod=0 ;;
        --no-run) run=0 ;;
        --ca-bundle) ca=${2:?--ca-bundle needs a file}; shift ;;
        *) echo "usage: scripts/build_image.sh [--debootstrap | --base IMAGE] [--cuda]" \
                "[--no-horovod] [--no-run] [--ca-bundle FILE]" >&2; exit 2 ;;
    esac
    shift
done
command -v buildah >/dev/null || { echo "image: buildah not found (Debian: apt-get install buildah)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "image: run as root (buildah's vfs storage and chroot isolation)" >&2; exit 2; }

rootfs="" containers=()
cleanup() {
    for c in "${containers[@]}"; do "${BUILDAH[@]}" rm "$c" >/dev/null 2>&1 || true; done
    if [ -n "$rootfs" ]; then rm -rf "$rootfs"; fi
}
trap cleanup EXIT

if [ "$debootstrap" = 1 ]; then
    command -v debootstrap >/dev/null || { echo "image: debootstrap not found" >&2; exit 2; }
    rootfs=$(mktemp -d "${TMPDIR:-/tmp}/ralp-image-root.XXXXXX")
    echo "image: making a Debian bookworm base with Python 3.11 (debootstrap)"
    debootstrap --variant=minbase \
        --include=ca-certificates,python3,python3-venv,python3-dev,python3-pip \
        bookworm "$rootfs" http://deb.debian.org/debian > "$rootfs.log" 2>&1 \
        || { tail -n 20 "$rootfs.log" >&2; rm -f "$rootfs.log"; exit 1; }
    rm -f "$rootfs.log"
    ctr=$("${BUILDAH[@]}" from scratch); containers+=("$ctr")
    mnt=$("${BUILDAH[@]}" mount "$ctr")
    cp -a "$rootfs/." "$mnt/"
    "${BUILDAH[@]}" umount "$ctr" >/dev/null
    "${BUILDAH[@]}" config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$ctr"
    "${BUILDAH[@]}" commit --quiet "$ctr" "$BASE_TAG" >/dev/null
    base=$BASE_TAG
fi

args=(--build-arg "TENSORFLOW=$tensorflow" --build-arg "RALP_HOROVOD=$horovod")
[ -n "$base" ] && args+=(--build-arg "BASE=$base")
if [ -f "$ca" ]; then
    args+=(--volume "$(realpath "$ca"):/run/ralp-build-ca.crt:ro"
           --build-arg PIP_CERT=/run/ralp-build-ca.crt)
fi
echo "image: building $TAG (base: ${base:-the Containerfile default}, TensorFlow: $tensorflow, Horovod: $horovod)"
start=$(date +%s)
# buildah's step-by-step log goes to stderr: stdout is the summary (these lines and the short
# job's table), as lab/experiments/image_build.py records it.
"${BUILDAH[@]}" bud --isolation chroot --layers=false "${args[@]}" -t "$TAG" -f Containerfile . >&2
echo "image: built $TAG in $(( $(date +%s) - start )) s" \
    "($("${BUILDAH[@]}" images --noheading --format '{{.ID}}, {{.Size}}' "$TAG"))"

if [ "$run" = 1 ]; then
    ctr=$("${BUILDAH[@]}" from "$TAG"); containers+=("$ctr")
    echo "image: running the bench's short job inside it"
    start=$(date +%s)
    "${BUILDAH[@]}" run --isolation chroot --workingdir /ralp "$ctr" -- \
        /ralp/.venv/bin/python -m ralp.bench --backend local
    echo "image: the bench ran inside $TAG in $(( $(date +%s) - start )) s"
fi
