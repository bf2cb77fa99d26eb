#!/usr/bin/env python3
"""Checks one job's committed output of the exactly-once example (sequence_source -> keyed_sum
-> file sink): every seq 0..COUNT-1 exactly once and every running sum right.

usage: scripts/check_output.py [FOLDER] [COUNT] [--keys K] [--job JOB_ID]
       (defaults: out/exactly-once-sum 1000000 --keys 16, the example job's settings)

Each committed line is `key,seq,sum`: sequence_source emits value = seq with key = seq % keys,
and keyed_sum emits the key's running sum, so after seq s the sum of key k is
k + (k + keys) + ... + s. Committed files are named part-<job>-<uid>-<subtask>-<checkpoint>
(the sinks put the job id in every name), so runs of the same job file into one folder are told
apart: --job picks one; without it the folder must hold exactly one job's files.

It reads the files line by line and keeps one byte per sequence number (a count capped at 2),
so its memory is COUNT bytes whatever the size of the output. Exit code 0 when the output is
exactly once, 1 when it is not, 2 when it cannot tell (bad arguments, no or several jobs)."""
import argparse
import os
import sys


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def file_safe_job(job: str) -> str:
    """The job id as the sinks write it into file names (engine/runtime/sink_file.hpp)."""
    if not job:
        return "job"
    raw = job.encode()
    out = "".join(chr(c) if chr(c).isascii() and (chr(c).isalnum() or c == ord("_")) else "_"
                  for c in raw)
    if out == job and len(out) <= 64:
        return out
    return out[:55] + "_%08x" % crc32c(raw)


def job_of(name: str):
    """part-<job>-<rest> -> <job>; None for any other name."""
    parts = name.split("-", 2)
    if len(parts) < 3 or parts[0] != "part" or not parts[1]:
        return None
    return parts[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", default="out/exactly-once-sum")
    parser.add_argument("count", nargs="?", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=16, help="the job's keys (default 16)")
    parser.add_argument("--job", help="the job id whose output to check (default: the only one)")
    args = parser.parse_args()
    if args.count < 0 or args.keys < 1:
        print("check_output: COUNT must be >= 0 and --keys >= 1", file=sys.stderr)
        return 2

    try:
        entries = sorted(os.scandir(args.folder), key=lambda e: e.name)
    except OSError as e:
        print(f"check_output: cannot list {args.folder}: {e.strerror}", file=sys.stderr)
        return 2
    files = {}  # job -> committed file paths
    for entry in entries:
        if entry.name.startswith(".") or not entry.is_file():
            continue
        job = job_of(entry.name)
        if job is not None:
            files.setdefault(job, []).append(entry.path)
    if args.job is not None:
        job = file_safe_job(args.job)
        if job not in files:
            print(f"check_output: no committed files of job {args.job} in {args.folder} "
                  f"(jobs there: {', '.join(sorted(files)) or 'none'})", file=sys.stderr)
            return 2
    elif not files:
        print(f"check_output: no committed files (part-<job>-...) in {args.folder}",
              file=sys.stderr)
        return 2
    elif len(files) > 1:
        print(f"check_output: {len(files)} jobs wrote into {args.folder}: "
              f"{', '.join(sorted(files))}; choose one with --job JOB_ID", file=sys.stderr)
        return 2
    else:
        job = next(iter(files))

    count, keys = args.count, args.keys
    seen = bytearray(count)  # per seq: 0, 1, or 2 for "more than once"
    lines = bad = wrong = 0
    for path in files[job]:
        with open(path, "rb") as f:
            for line in f:
                lines += 1
                fields = line.split(b",")
                try:
                    if len(fields) != 3:
                        raise ValueError
                    key, seq, total = (int(x) for x in fields)
                except ValueError:
                    bad += 1
                    continue
                if not 0 <= seq < count or key != seq % keys:
                    bad += 1
                    continue
                if seen[seq] < 2:
                    seen[seq] += 1
                n = (seq - key) // keys  # records of this key before seq
                wrong += total != (n + 1) * key + keys * n * (n + 1) // 2
    missing = seen.count(0)
    duplicated = count - missing - seen.count(1)
    report = (f"job {job}: {lines} lines, {missing} seq missing, {duplicated} duplicated, "
              f"{wrong} wrong sums")
    if bad:
        report += f", {bad} malformed or out of range (is --keys right?)"
    print(report)
    return 0 if missing == duplicated == wrong == bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
