#!/bin/sh
# Build PMDK's example programs (libpmemobj-dev's examples) unmodified, and the test's own
# (mkpool.c, threads.c).
# Usage: build.sh EXAMPLES OUT CFLAGS... -- LIBS...
set -e
EX=$1; OUT=$2; shift 2
CFLAGS=""; while [ "$1" != "--" ]; do CFLAGS="$CFLAGS $1"; shift; done; shift
LIBS="$*"
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
# cc -o OUT [LINK-FLAGS] SOURCES...: each source compiled with CFLAGS (the exact level's
# -fsanitize=thread instruments it; the link below takes no sanitizer run-time: the library
# serves the hooks), then linked with LIBS.
cc() {
  out=$2; shift 2; objs=""; ldflags=""
  for a in "$@"; do
    case "$a" in
      *.c) o="$out.$(basename "$a" .c).o"; gcc -O2 -w -I"$HERE" $CFLAGS -c "$a" -o "$o"; objs="$objs $o" ;;
      -I*) CFLAGS="$CFLAGS $a" ;;
      *) ldflags="$ldflags $a" ;;
    esac
  done
  gcc -o "$out" $objs $ldflags $LIBS -lpthread -lm
  rm -f $objs
}
MAPSRC="$EX/map/map.c $EX/map/map_btree.c $EX/map/map_ctree.c $EX/map/map_rbtree.c $EX/map/map_rtree.c $EX/map/map_skiplist.c $EX/map/map_hashmap_tx.c $EX/map/map_hashmap_atomic.c $EX/map/map_hashmap_rp.c $EX/tree_map/btree_map.c $EX/tree_map/ctree_map.c $EX/tree_map/rbtree_map.c $EX/tree_map/rtree_map.c $EX/list_map/skiplist_map.c $EX/hashmap/hashmap_tx.c $EX/hashmap/hashmap_atomic.c $EX/hashmap/hashmap_rp.c"
MAPINC="-I$EX -I$EX/map -I$EX/hashmap -I$EX/tree_map -I$EX/list_map"
cc -o "$OUT/mapcli" $MAPINC "$EX/map/mapcli.c" $MAPSRC
cc -o "$OUT/data_store" $MAPINC "$EX/map/data_store.c" $MAPSRC
cc -o "$OUT/queue" "$EX/queue/queue.c"
cc -o "$OUT/fifo" "$EX/linkedlist/fifo.c"
for s in string_store string_store_tx string_store_tx_type; do
  cc -o "$OUT/${s}_writer" "$EX/$s/writer.c"
  cc -o "$OUT/${s}_reader" "$EX/$s/reader.c"
done
# PMDK links libart as a shared library beside arttree.c, whose copies of art.h's globals the
# dynamic linker merges; linked statically here, the first definition is taken as well.
cc -o "$OUT/arttree" "$EX/libart/arttree.c" "$EX/libart/art.c" -Wl,--allow-multiple-definition
cc -o "$OUT/examine_arttree" "$EX/libart/arttree_structures.c" "$EX/libart/arttree_examine.c" "$EX/libart/arttree_search.c"
cc -o "$OUT/slab_allocator" "$EX/slab_allocator/main.c" "$EX/slab_allocator/slab_allocator.c"
cc -o "$OUT/obj_pmemblk" "$EX/pmemblk/obj_pmemblk.c"
for p in obj_pmemlog obj_pmemlog_macros obj_pmemlog_minimal obj_pmemlog_simple; do cc -o "$OUT/$p" "$EX/pmemlog/$p.c"; done
for p in btree lists pi manpage setjmp buffons_needle_problem; do cc -o "$OUT/$p" "$EX/$p.c"; done
cc -o "$OUT/mkpool" "$HERE/mkpool.c"
# A threaded program of our own (tests/pmdk.rs): four threads under PMEMmutexes.
cc -o "$OUT/threads" "$HERE/threads.c"
