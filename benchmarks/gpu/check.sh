#!/usr/bin/env bash
# The GPU check (docs/benchmarks.md "The GPU check"): one command on a GPU machine without network.
#   benchmarks/gpu/check.sh OUT            # CUDA; OUT: the folder for everything a reader needs
#   DEVICE=cpu benchmarks/gpu/check.sh OUT # the rehearsal on the CPU
# 1. brings what the machine lacks from benchmarks/gpu/wheels (fetch-wheels.sh, beforehand);
# 2. prints the machine (GPU, driver, torch, CUDA) and runs the CUDA-only tests;
# 3. runs configs/gpu-smoke.yaml end to end through the claims ledger on DEVICE, in a scratch
#    copy of the tree (this checkout's results/ are left alone), with every job's wall time;
# 4. with the time left of BUDGET seconds, a scaled run of the two heaviest trainings
#    (SimCLR ResNet-18 and WRN-28-2 FixMatch/FlexMatch/UDA) at SCALE x the smoke's epochs and steps.
# Writes OUT/check.log (all it prints), OUT/rule_times.csv, OUT/scaled_times.csv, and
# OUT/results.tgz: the ledger, the digest, every job's log and benchmark file. Exit status: that of the smoke run.
set -uo pipefail
out=${1:?usage: benchmarks/gpu/check.sh OUT_FOLDER}
device=${DEVICE:-cuda}
budget=${BUDGET:-480}
scale=${SCALE:-10}
cores=${CORES:-$(nproc)}
repo=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
exec > >(tee "$out/check.log") 2>&1
start=$SECONDS
say() { printf '\n== [%4ds] %s\n' "$((SECONDS - start))" "$*"; }

say "environment"
python=${PYTHON:-python3}
if ! "$python" -c "import snakemake, opacus, dp_accounting, pytest, yaml, jsonschema" 2>/dev/null; then
    site=${TMPDIR:-/tmp}/privssl-gpu-site
    wheels=("$repo"/benchmarks/gpu/wheels/*.whl)
    [ -e "${wheels[0]}" ] || { echo "no wheels in $repo/benchmarks/gpu/wheels: run benchmarks/gpu/fetch-wheels.sh first"; exit 2; }
    if "$python" -m pip --version >/dev/null 2>&1; then
        "$python" -m pip install -q --no-index --no-deps --disable-pip-version-check --target "$site" "${wheels[@]}" \
            || exit 2
    else  # no pip: a wheel is a zip of its files laid out for site-packages (console scripts aside)
        "$python" -c 'import sys, zipfile; [zipfile.ZipFile(w).extractall(sys.argv[1]) for w in sys.argv[2:]]' \
            "$site" "${wheels[@]}" || exit 2
    fi
    export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" PATH="$site/bin:$PATH"
    echo "installed ${#wheels[@]} wheels into $site"
fi
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
"$python" - <<'PY'
import platform, torch, torchvision, torch_geometric, opacus, snakemake
print(f"python {platform.python_version()}, torch {torch.__version__} (CUDA {torch.version.cuda}, cuDNN "
      f"{torch.backends.cudnn.version()}), torchvision {torchvision.__version__}, torch-geometric "
      f"{torch_geometric.__version__}, opacus {opacus.__version__}, snakemake {snakemake.__version__}")
print("CUDA device:", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none")
PY
gpu_name=$("$python" -c "import torch; print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'cpu')")

say "CUDA-only tests (skipped without CUDA)"
(cd "$repo" && PYTHONPATH="$repo/src${PYTHONPATH:+:$PYTHONPATH}" timeout 120 "$python" -m pytest -q -p no:cacheprovider \
    -p no:xdist -o addopts="" -m cuda $(grep -l "mark.cuda" tests/test_*.py) 2>&1 | tail -25)

# A scratch copy of the tree: the run's results/ and .snakemake/ stay out of this checkout.
work=${WORK:-${TMPDIR:-/tmp}/privssl-gpu-work}
rm -rf "$work" && mkdir -p "$work"
(cd "$repo" && tar --exclude=./results --exclude=./.snakemake --exclude=./.venv --exclude=./mutants \
    --exclude=./benchmarks/gpu/wheels --exclude=./.git -cf - .) | (cd "$work" && tar -xf -)
cd "$work" || exit 2
snakemake=("$python" -m snakemake --cores "$cores" --configfile configs/gpu-smoke.yaml --replace-workflow-config
           --scheduler greedy --keep-going --rerun-incomplete --printshellcmds)

say "smoke run on $device ($cores cores)"
smoke_budget=$((budget - (SECONDS - start) - 20))
timeout "$smoke_budget" "${snakemake[@]}" --config device="$device" > "$out/smoke.log" 2>&1
status=$?
tail -30 "$out/smoke.log"
echo "smoke run: exit status $status after $((SECONDS - start)) s"
"$python" "$repo/benchmarks/gpu/collect.py" results "$out/rule_times.csv"
# one archive: the device tool returns a few flat files, not a tree
find results .snakemake/log \( -name "claims*" -o -name "digest.md" -o -name "*.log" -o -name "*.tsv" \) -print0 \
    | tar czf "$out/results.tgz" --null -T -

left=$((budget - (SECONDS - start)))
if [ "$status" -eq 0 ] && [ "$left" -gt 90 ]; then
    say "scaled run: SimCLR and semi-supervised training at $scale x the smoke's epochs and steps (${left}s left)"
    sed -i "s/^  epochs: 2\$/  epochs: $((2 * scale))/; s/train: {steps: 40, checkpoint_every: 20,/train: {steps: $((40 * scale)), checkpoint_every: $((20 * scale)),/; s/early_stopping: 20 /early_stopping: $((20 * scale)) /" configs/gpu-smoke.yaml
    rm -rf results/*/benchmarks
    timeout "$((left - 30))" "${snakemake[@]}" --config device="$device" --until pretrain semileak_train \
        > "$out/scaled.log" 2>&1
    echo "scaled run: exit status $? after $((SECONDS - start)) s"
    "$python" "$repo/benchmarks/gpu/collect.py" results "$out/scaled_times.csv" || true
fi
say "done on $gpu_name: $out"
exit "$status"
