#!/usr/bin/env python3
"""Per-file figures of a cargo-mutants run from the lists it wrote (copied to benches/results/mutants-core/).

    tests/mutants/summary.py                                # benches/results/mutants-core/, an --iterate run
    tests/mutants/summary.py benches/results/mutants-rest   # any other copied run

The wider run was resumed with --iterate, so mutants-core/ has a previously_caught.txt
(the first part's caught and unviable) and its total is the 434 mutants of its files;
a directory without one is a whole run, its total what its lists hold."""
import collections,os,sys
d=sys.argv[1] if len(sys.argv)>1 else 'benches/results/mutants-core'
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
    print(f"all files: {tot['previously_caught']} caught or unviable in the first run, then {tot['caught']} caught, {tot['missed']} missed, {tot['timeout']} timed out, {tot['unviable']} unviable, of 434 mutants")
else:
    print(f"all files: {tot['caught']} caught, {tot['missed']} missed, {tot['timeout']} timed out, {tot['unviable']} unviable, of {sum(tot.values())} mutants")
