#!/usr/bin/env python
"""Replay a finished run's jobs on N cores with other rule priorities: what wall time would the
same jobs take if the scheduler ordered them otherwise? (issue 50)

A Snakemake log (the run's stderr) says for every job its rule, input and output files, priority
and when it started and finished. The replay takes each job's measured duration (finish − start,
so contention of the measured run is in it), its dependencies (a job needs the jobs that wrote
its inputs) and a priority per rule, and schedules the DAG greedily as Snakemake's scheduler
does on one-core jobs: whenever a core is free, the ready job of highest priority starts (ties:
the order the log started them). It first replays the measured priorities, so its error against
the measured wall time is in the output, then the proposed ones.

    python benchmarks/schedule_replay.py RUN/run.err --cores 2 --priority contrastive_train=11 \
        --scale dpadapter_train=0.6

An estimate, not a measurement: durations change with what runs beside a job.
"""

from __future__ import annotations

import argparse
import heapq
import re
from datetime import datetime

STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ [\d:]+ \d{4})\]$")


def parse(log: str) -> list[dict]:
    """Every job of the log: rule, jobid, inputs, outputs, priority, start and end (seconds)."""
    jobs, by_id, stamp, current = [], {}, None, None
    for line in log.splitlines():
        if m := STAMP.match(line.strip()):
            stamp = datetime.strptime(m.group(1), "%a %b %d %H:%M:%S %Y").timestamp()
            continue
        words = line.strip()
        if m := re.match(r"^(local)?rule (\w+):$", words):
            current = {"rule": m.group(2), "start": stamp, "inputs": [], "outputs": [], "priority": 0}
            jobs.append(current)
        elif current is not None and words.startswith("input: "):
            current["inputs"] = [f.strip() for f in words[len("input: "):].split(",")]
        elif current is not None and words.startswith("output: "):
            current["outputs"] = [f.strip() for f in words[len("output: "):].split(",")]
        elif current is not None and words.startswith("priority: "):
            current["priority"] = int(words.split()[1])
        elif current is not None and words.startswith("jobid: "):
            by_id[int(words.split()[1])] = current
        elif m := re.match(r"^Finished jobid: (\d+)", words):
            by_id[int(m.group(1))]["end"] = stamp
    return [job for job in jobs if "end" in job]


def replay(jobs: list[dict], cores: int, priority: dict[str, int], scale: dict[str, float] | None = None) -> float:
    """Greedy list scheduling of the jobs' measured durations (times `scale` per rule): the wall time."""
    scale = scale or {}
    writer = {out: i for i, job in enumerate(jobs) for out in job["outputs"]}
    needs = [{writer[f] for f in job["inputs"] if f in writer and writer[f] != i} for i, job in enumerate(jobs)]
    done_at: dict[int, float] = {}
    running: list[tuple[float, int]] = []
    clock, waiting = 0.0, set(range(len(jobs)))
    while waiting or running:
        ready = [i for i in waiting if all(d in done_at and done_at[d] <= clock for d in needs[i])]
        ready.sort(key=lambda i: (-priority.get(jobs[i]["rule"], jobs[i]["priority"]), jobs[i]["start"]))
        for i in ready[:cores - len(running)]:
            waiting.discard(i)
            duration = (jobs[i]["end"] - jobs[i]["start"]) * scale.get(jobs[i]["rule"], 1.0)
            heapq.heappush(running, (clock + duration, i))
        end, i = heapq.heappop(running)
        clock, done_at[i] = end, end
    return clock


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("log", help="the run's Snakemake log (stderr)")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--priority", nargs="*", default=[], help="rule=priority pairs to replay with")
    parser.add_argument("--scale", nargs="*", default=[], help="rule=factor pairs: a rule's jobs made that much "
                        "shorter or longer (a speed-up measured on its own)")
    args = parser.parse_args()
    jobs = parse(open(args.log).read())
    measured = max(j["end"] for j in jobs) - min(j["start"] for j in jobs)
    busy = sum(j["end"] - j["start"] for j in jobs)
    proposed = {rule: int(value) for rule, value in (pair.split("=") for pair in args.priority)}
    scale = {rule: float(value) for rule, value in (pair.split("=") for pair in args.scale)}
    print(f"{len(jobs)} jobs, {busy / 60:.1f} job-minutes; on {args.cores} cores at least "
          f"{busy / args.cores / 60:.1f} min")
    print(f"measured wall: {measured / 60:.1f} min; replayed with the run's priorities: "
          f"{replay(jobs, args.cores, {}) / 60:.1f} min")
    if proposed or scale:
        print(f"replayed with priorities {proposed} and durations scaled {scale}: "
              f"{replay(jobs, args.cores, proposed, scale) / 60:.1f} min")


if __name__ == "__main__":
    main()
