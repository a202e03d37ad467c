#!/usr/bin/env python3
"""Per-file figures of a cargo-mutants run from the lists it wrote (copied to benches/results/mutants-core/)."""
import collections,os,re
d='benches/results/mutants-core'
c=collections.defaultdict(collections.Counter)
for kind in ['previously_caught','caught','missed','timeout','unviable']:
    for line in open(os.path.join(d,kind+'.txt')):
        f=line.split(':')[0]
        c[f][kind]+=1
tot=collections.Counter()
for f in sorted(c):
    k=c[f]; tot.update(k)
    print(f"{f}: {k['previously_caught']} caught or unviable in the first run, then {k['caught']} caught, {k['missed']} missed, {k['timeout']} timed out, {k['unviable']} unviable")
print(f"all files: {tot['previously_caught']} caught or unviable in the first run, then {tot['caught']} caught, {tot['missed']} missed, {tot['timeout']} timed out, {tot['unviable']} unviable, of 434 mutants")
