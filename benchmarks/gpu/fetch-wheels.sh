#!/usr/bin/env bash
# Download the wheels of requirements-gpu.txt for CPython 3.12 on Linux x86_64 into
# benchmarks/gpu/wheels (git-ignored; about 32 MB), on a machine with network, before the GPU
# check: the GPU machine has none. A package published as source only (connection-pool) is
# built into a pure-Python wheel here. Run from the repository root with the project's .venv.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
wheels="$here/wheels"
pip=${PIP:-.venv/bin/pip}
mkdir -p "$wheels"
platforms=(--platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64
           --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 --platform any)
grep -v '^#' "$here/requirements-gpu.txt" | while read -r pin; do
    [ -n "$pin" ] || continue
    if ! "$pip" download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
            --abi cp312 --abi abi3 --abi none "${platforms[@]}" -d "$wheels" "$pin" 2>/dev/null; then
        echo "no wheel of $pin for CPython 3.12: building one from its source (pure Python)"
        "$pip" wheel -q --no-deps -w "$wheels" "$pin"
        if ls "$wheels" | grep -i "^$(echo "${pin%%==*}" | tr - _)-" | grep -vq -- "-py3-none-any.whl$"; then
            echo "the wheel built for $pin is not pure Python: it will not install on CPython 3.12" >&2
            exit 1
        fi
    fi
done
echo "$(ls "$wheels" | wc -l) wheels, $(du -sh "$wheels" | cut -f1), in $wheels"
