#!/usr/bin/env bash
# Build Horovod 0.28.1 (TensorFlow + Gloo, no MPI; NCCL's GPU operations where CUDA and NCCL
# are found) once and install it into .venv.
#
# Horovod 0.28.1 is the latest release and ships no wheel, and its sdist does not build against
# TF 2.21 as is: horovod/tensorflow/xla_mpi_ops.cc needs XLA headers the TF wheel lacks. We drop
# that one file from the build (it is only used with TF's XLA compilation of Horovod ops, which
# ralp does not use) and build with Gloo as the controller. See docs/how-to/install.md.
#
# A second, one-line fix: Horovod's Gloo context for a process set (the global set included,
# which every allreduce uses) creates its device with an interface name it never copied from
# the global context, so it ignores HOROVOD_GLOO_IFACE (horovodrun --network-interface) and
# falls back to resolving the machine's hostname. Where that resolves to a loopback address
# (Debian's 127.0.1.1 default, or every network namespace of one machine) the ranks on
# different hosts try to reach each other on 127.0.0.1 and fail with "connect ... Connection
# refused". The patch copies the interface from the global context.
#
# The built wheel is cached outside the repository, keyed by Horovod, TensorFlow and Python
# versions, so later set-ups (and CI on the same machine) install it in seconds.
#
#   scripts/build_horovod.sh            install from the cache, building the wheel if missing
#   scripts/build_horovod.sh --rebuild  build again even if a cached wheel exists
#
# GPU operations: NCCL (HOROVOD_GPU_OPERATIONS=NCCL) where this TensorFlow is built with CUDA,
# nvcc is found (PATH or CUDA_HOME) and nccl.h is (NCCL_HOME, CUDA_HOME or /usr); otherwise
# Gloo alone, whose allreduce on GPUs goes through host memory. The script says which and why.
# Untested on GPUs: no GPU host was available where ralp is developed (docs/how-to/gpus.md).
#
# Environment: RALP_WHEEL_CACHE (cache folder, default ~/.cache/ralp/wheels),
#              RALP_BUILD_JOBS (parallel compile jobs, default: number of cores),
#              RALP_HOROVOD_GPU (auto, the default; nccl: fail where NCCL cannot be built;
#              gloo: never build NCCL's operations).
set -euo pipefail
cd "$(dirname "$0")/.."

HOROVOD_VERSION=0.28.1
PATCH_LEVEL=2  # bump when the patches below change: the cache key includes it
PY=.venv/bin/python
if [ ! -x "$PY" ]; then
    echo "horovod: no .venv here; run ./scripts/setup.sh first" >&2
    exit 2
fi

rebuild=0
case "${1:-}" in
    --rebuild) rebuild=1 ;;
    "") ;;
    *) echo "usage: scripts/build_horovod.sh [--rebuild]" >&2; exit 2 ;;
esac

tf_version=$("$PY" -c 'import importlib.metadata as m
for d in ("tensorflow-cpu", "tensorflow"):
    try:
        print(m.version(d)); break
    except m.PackageNotFoundError:
        pass
else:
    raise SystemExit("no tensorflow in .venv")')
py_tag=$("$PY" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')

# Which GPU operations: sets gpu_ops (nccl or gloo) and gpu_why.
choose_gpu_operations() {
    local want=${RALP_HOROVOD_GPU:-auto} nvcc header dir
    gpu_ops=gloo
    case "$want" in
        gloo) gpu_why="RALP_HOROVOD_GPU=gloo"; return ;;
        auto|nccl) ;;
        *) echo "horovod: RALP_HOROVOD_GPU must be auto, nccl or gloo, got '$want'" >&2
           exit 2 ;;
    esac
    if ! "$PY" -c 'import sys, tensorflow as tf; sys.exit(0 if tf.test.is_built_with_cuda() else 1)' \
        >/dev/null 2>&1; then
        gpu_why="this TensorFlow is built without CUDA"
    else
        nvcc=$(command -v nvcc || true)
        [ -z "$nvcc" ] && [ -x "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" ] \
            && nvcc="${CUDA_HOME:-/usr/local/cuda}/bin/nvcc"
        for dir in ${NCCL_HOME:+"$NCCL_HOME"} ${CUDA_HOME:+"$CUDA_HOME"} /usr/local/cuda /usr; do
            [ -f "$dir/include/nccl.h" ] && { header="$dir"; break; }
        done
        if [ -z "$nvcc" ]; then
            gpu_why="nvcc not found (set CUDA_HOME)"
        elif [ -z "${header:-}" ]; then
            gpu_why="nccl.h not found (set NCCL_HOME)"
        else
            gpu_ops=nccl
            gpu_why="CUDA ($nvcc) and NCCL ($header) found"
            export HOROVOD_GPU_OPERATIONS=NCCL HOROVOD_NCCL_HOME="$header"
            export HOROVOD_CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$nvcc")")}
        fi
    fi
    if [ "$want" = nccl ] && [ "$gpu_ops" != nccl ]; then
        echo "horovod: RALP_HOROVOD_GPU=nccl, but NCCL's operations cannot be built: $gpu_why" >&2
        exit 1
    fi
}
choose_gpu_operations
echo "horovod: GPU operations: $gpu_ops ($gpu_why)"
cache_root=${RALP_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ralp/wheels}
cache_dir="$cache_root/horovod-$HOROVOD_VERSION-ralp$PATCH_LEVEL-tf$tf_version-$py_tag-$(uname -m)"
[ "$gpu_ops" = nccl ] && cache_dir="$cache_dir-nccl"
mkdir -p "$cache_dir"

wheel=$(ls "$cache_dir"/horovod-"$HOROVOD_VERSION"-*.whl 2>/dev/null | head -n1 || true)
if [ -n "$wheel" ] && [ "$rebuild" = 0 ]; then
    echo "horovod: using cached wheel $wheel"
else
    work=$(mktemp -d "${TMPDIR:-/tmp}/ralp-horovod-build.XXXXXX")
    log="$cache_dir/build.log"
    step="start"
    fail() {
        echo "" >&2
        echo "horovod: the build failed while: $step" >&2
        echo "horovod: last lines of the build log ($log):" >&2
        tail -n 25 "$log" >&2 || true
        echo "horovod: to retry: scripts/build_horovod.sh --rebuild" >&2
        echo "horovod: it needs gcc/g++ (C++17), cmake >= 3.13, about 4 GiB of memory, and PyPI" >&2
        echo "horovod: to set up without Horovod (the 'horovod' bench mode is then unavailable):" >&2
        echo "horovod:     RALP_HOROVOD=0 ./scripts/setup.sh" >&2
        rm -rf "$work"
        exit 1
    }
    trap fail ERR
    : > "$log"

    for tool in cmake g++ make; do
        step="looking for $tool"
        command -v "$tool" >>"$log" 2>&1 || { echo "horovod: $tool not found" >>"$log"; false; }
    done

    step="downloading the horovod==$HOROVOD_VERSION sdist from PyPI"
    echo "horovod: $step"
    "$PY" -m pip download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
        "horovod==$HOROVOD_VERSION" -d "$work" >>"$log" 2>&1

    step="unpacking and patching the sdist (dropping xla_mpi_ops.cc; Gloo interface fix)"
    tar -xzf "$work/horovod-$HOROVOD_VERSION.tar.gz" -C "$work" >>"$log" 2>&1
    cmakelists="$work/horovod-$HOROVOD_VERSION/horovod/tensorflow/CMakeLists.txt"
    grep -q 'xla_mpi_ops.cc' "$cmakelists"
    sed -i '/xla_mpi_ops\.cc/d' "$cmakelists"
    ! grep -q 'xla_mpi_ops.cc' "$cmakelists"
    gloo_context="$work/horovod-$HOROVOD_VERSION/horovod/common/gloo/gloo_context.cc"
    sed -i '/InitializeForProcessSet(const GlooContext& global_context,/,/CreateDevice/ s/^  device_attr.iface = gloo_iface_;/  gloo_iface_ = global_context.gloo_iface_;\n  device_attr.iface = gloo_iface_;/' "$gloo_context"
    grep -q 'gloo_iface_ = global_context.gloo_iface_;' "$gloo_context"

    step="compiling Horovod (TensorFlow + Gloo, GPU operations: $gpu_ops; several minutes)"
    echo "horovod: $step, log in $log"
    jobs=${RALP_BUILD_JOBS:-$(nproc)}
    HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 \
        HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 HOROVOD_CPU_OPERATIONS=gloo \
        MAKEFLAGS="-j$jobs" \
        "$PY" -m pip wheel --no-build-isolation --no-deps --disable-pip-version-check -v \
        -w "$work/dist" "$work/horovod-$HOROVOD_VERSION" >>"$log" 2>&1

    step="storing the wheel in $cache_dir"
    built=$(ls "$work"/dist/horovod-"$HOROVOD_VERSION"-*.whl)
    rm -f "$cache_dir"/horovod-*.whl
    cp "$built" "$cache_dir/"
    wheel="$cache_dir/$(basename "$built")"
    rm -rf "$work"
    trap - ERR
    echo "horovod: built $wheel"
fi

# Horovod's own dependencies are pinned in constraints.txt.
"$PY" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "$wheel"
"$PY" -m pip install --quiet --disable-pip-version-check -c constraints.txt \
    cloudpickle psutil pyyaml packaging

# Check what was installed: the TF extension loads and Gloo is compiled in.
if ! "$PY" -c 'import horovod.tensorflow as hvd, sys; sys.exit(0 if hvd.gloo_built() else 3)' \
    >/dev/null 2>&1; then
    echo "horovod: the installed Horovod does not load with this TensorFlow, or lacks Gloo." >&2
    echo "horovod: rebuild it with: scripts/build_horovod.sh --rebuild" >&2
    exit 1
fi
built_ops=$("$PY" -c 'import horovod.tensorflow as hvd; print("nccl" if hvd.nccl_built() else "gloo")' 2>/dev/null)
echo "horovod: ready (horovod $HOROVOD_VERSION, Gloo, GPU operations: $built_ops, TensorFlow $tf_version)"
