#!/usr/bin/env python3
"""Checks the exactly-once example's committed output: every seq 0..count-1 exactly once and
every running sum right (sequence_source emits value = seq, keyed_sum emits the running sum).

usage: scripts/check_output.py [FOLDER] [COUNT]   (defaults: out/exactly-once-sum 1000000)"""
import glob
import os
import sys

folder = sys.argv[1] if len(sys.argv) > 1 else "out/exactly-once-sum"
count = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000
rows = []
for path in glob.glob(os.path.join(folder, "*")):
    if os.path.basename(path).startswith(".") or not os.path.isfile(path):
        continue
    with open(path) as f:
        for line in f:
            key, seq, total = (int(x) for x in line.split(","))
            rows.append((seq, key, total))
rows.sort()
seqs = [r[0] for r in rows]
missing = count - len(set(seqs))
duplicates = len(seqs) - len(set(seqs))
sums, wrong = {}, 0
for seq, key, total in rows:
    sums[key] = sums.get(key, 0) + seq
    wrong += sums[key] != total
print(f"{len(rows)} lines, {missing} seq missing, {duplicates} duplicated, {wrong} wrong sums")
sys.exit(0 if missing == 0 and duplicates == 0 and wrong == 0 else 1)
