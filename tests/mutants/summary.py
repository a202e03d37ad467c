#!/usr/bin/env python3
"""Per-file figures of a cargo-mutants run from the lists it wrote (copied to benches/results/mutants-core/).

    tests/mutants/summary.py                                # benches/results/mutants-core/, an --iterate run
    tests/mutants/summary.py benches/results/mutants-rest   # any other copied run

A run resumed with --iterate has a previously_caught.txt (the earlier part's caught and
unviable); mutants-core/'s total is the 434 mutants of its files, another's what its lists
hold. A directory without one is a whole run."""
import collections,os,sys
default='benches/results/mutants-core'
d=sys.argv[1] if len(sys.argv)>1 else default
iterated=os.path.exists(os.path.join(d,'previously_caught.txt'))
c=collections.defaultdict(collections.Counter)
for kind in ['previously_caught','caught','missed','timeout','unviable']:
    path=os.path.join(d,kind+'.txt')
    if not os.path.exists(path):
        continue
    for line in open(path):
        f=line.split(':')[0]
        c[f][kind]+=1
tot=collections.Counter()
for f in sorted(c):
    k=c[f]; tot.update(k)
    if iterated:
        print(f"{f}: {k['previously_caught']} caught or unviable in the first run, then {k['caught']} caught, {k['missed']} missed, {k['timeout']} timed out, {k['unviable']} unviable")
    else:
        print(f"{f}: {k['caught']} caught, {k['missed']} missed, {k['timeout']} timed out, {k['unviable']} unviable, of {sum(k.values())} mutants")
if iterated:
    # The wider run's 434 (its first part's missed are not in previously_caught.txt);
    # another --iterate run's total is what its lists hold.
    total=434 if os.path.normpath(d)==default else sum(tot.values())
    print(f"all files: {tot['previously_caught']} caught or unviable in the first run, then {tot['caught']} caught, {tot['missed']} missed, {tot['timeout']} timed out, {tot['unviable']} unviable, of {total} mutants")
else:
    print(f"all files: {tot['caught']} caught, {tot['missed']} missed, {tot['timeout']} timed out, {tot['unviable']} unviable, of {sum(tot.values())} mutants")
