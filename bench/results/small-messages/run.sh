#!/usr/bin/env bash
# The measurements of the small-message work, as run at the commit named in the README beside it
# (paths as on that machine: /tmp/spools-main is the release build of 616e539).
# Final measurements for issue 16: alternating main (616e539) and new, medians taken later.
set -u
cd /work/wt/int
N=./target/release/spools; M=/tmp/spools-main
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
O=/tmp/f16
mpicc.openmpi -O2 -o $O/pingpong-ompi bench/peers/pingpong.c 2>/dev/null
mpicc.openmpi -O2 -o $O/ring-ompi bench/peers/ring.c 2>/dev/null
for i in 1 2 3 4 5; do
  for b in M N; do B=${!b}
    echo "== $b run $i" 
    $B run -n 2 -- $B bench pingpong --api tagged --sizes 8 --json > $O/tagged-$b.$i.json 2>/dev/null
    $B run -n 2 -- $B bench pingpong --sizes 8 --json > $O/am-$b.$i.json 2>/dev/null
    $B run -n 8 -- $B bench ring --json > $O/ring-$b.$i.json 2>/dev/null
    $B run -n 2 -- $B bench idle --json > $O/idle-$b.$i.json 2>/dev/null
    $B run -n 2 -- $B bench pingpong --transport tcp --sizes 8,1M --json > $O/tcp-$b.$i.json 2>/dev/null
  done
  mpirun.openmpi --oversubscribe -n 8 $O/ring-ompi > $O/ring-ompi.$i.txt 2>/dev/null
  mpirun.openmpi -n 2 $O/pingpong-ompi 8 > $O/pingpong-ompi.$i.txt 2>/dev/null
done
for P in 2 4 8; do for i in 1 2 3; do
  $N run -n $P -- $N bench coll --ops allreduce,iallreduce --sizes 8,512,4K --batches 5 --json > $O/icoll-P$P.$i.json 2>/dev/null
done; done
for x in channels burst bulk; do $N run -n 2 -- $N bench grim $x --json --plot $O/grim-$x.svg > $O/grim-$x.json 2>/dev/null; done
echo done
