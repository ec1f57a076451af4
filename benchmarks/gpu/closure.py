"""Print the pinned closure of what the GPU machine lacks (requirements-gpu.txt), read from this
environment's installed distributions: Snakemake, Opacus, dp-accounting, PyYAML, jsonschema,
threadpoolctl and pytest with every dependency they need on CPython 3.12 / Linux x86_64, minus
what the GPU machine has."""

from __future__ import annotations

import importlib.metadata as metadata
import re

from packaging.requirements import Requirement

WANTED = ["snakemake", "opacus", "dp-accounting", "pyyaml", "jsonschema", "threadpoolctl", "pytest"]
ON_THE_GPU_MACHINE = {"torch", "torchvision", "torch-geometric", "numpy", "pandas", "scipy", "scikit-learn",
                      "matplotlib"}
TARGET = {"extra": "", "python_version": "3.12", "python_full_version": "3.12.3", "sys_platform": "linux",
          "platform_system": "Linux", "implementation_name": "cpython", "platform_python_implementation": "CPython",
          "os_name": "posix", "platform_machine": "x86_64"}


def normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(wanted: list[str]) -> dict[str, str]:
    pinned: dict[str, str] = {}
    stack = list(wanted)
    while stack:
        name = normalised(stack.pop())
        if name in pinned or name in ON_THE_GPU_MACHINE:
            continue
        distribution = metadata.distribution(name)
        pinned[name] = distribution.version
        for line in distribution.requires or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate(TARGET):
                stack.append(requirement.name)
    return pinned


HEADER = """# What the GPU check (check.sh) brings to a GPU machine without network, as wheels for CPython
# 3.12 on x86_64 (fetch-wheels.sh): Snakemake 9 and its dependencies, Opacus, dp-accounting and
# pytest, pinned as requirements.txt. Not here: what that machine has (torch, torchvision,
# torch-geometric, numpy, pandas, scipy, scikit-learn, matplotlib). Regenerate after a change of
# requirements.txt with `python benchmarks/gpu/closure.py > benchmarks/gpu/requirements-gpu.txt`.
"""

if __name__ == "__main__":
    print(HEADER, end="")
    for name, version in sorted(closure(WANTED).items()):
        print(f"{name}=={version}")
