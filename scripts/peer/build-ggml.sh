#!/usr/bin/env bash
# build-ggml.sh: builds scripts/peer/q4_0_bench.c against ggml's base library (the sources of
# ggml's ggml-base target: ggml.c, ggml-quants.c and the rest), for scripts/peer-bench.sh. ggml's
# code is not part of this repository: give a checkout of the ggml repository (github.com/ggml-org/ggml).
# No cmake needed: the same sources and definitions as ggml's CMake build, compiled with the flags
# of its Release build (-O3 -DNDEBUG) plus CFLAGS.
#
#   scripts/peer/build-ggml.sh GGML_DIR OUT_DIR                       # ggml-base as ggml builds it
#   CFLAGS=-march=native scripts/peer/build-ggml.sh GGML_DIR OUT_DIR  # tuned to this CPU
#
# Writes OUT_DIR/libggml-base.a and OUT_DIR/q4_0_bench (the driver; give it to peer-bench.sh as
# GGML_Q4_0=OUT_DIR/q4_0_bench). Needs a C11 and a C++17 compiler (CC, CXX; default gcc, g++).
set -euo pipefail

ggml=${1:?usage: build-ggml.sh GGML_DIR OUT_DIR}
out=${2:?usage: build-ggml.sh GGML_DIR OUT_DIR}
cc=${CC:-gcc}
cxx=${CXX:-g++}
here=$(cd "$(dirname "$0")" && pwd)
[[ -f "$ggml/src/ggml-quants.c" ]] || { echo "build-ggml.sh: $ggml is not a ggml checkout (no src/ggml-quants.c)" >&2; exit 1; }
commit=$(git -C "$ggml" rev-parse --short HEAD 2>/dev/null || echo unknown)
mkdir -p "$out/obj"
flags=(-O3 -DNDEBUG -D_GNU_SOURCE -DGGML_BUILD "-DGGML_VERSION=\"peer\"" "-DGGML_COMMIT=\"$commit\""
	-I"$ggml/include" -I"$ggml/src" ${CFLAGS:-})
# ggml-base's sources (ggml's src/CMakeLists.txt, add_library(ggml-base ...)); ones a checkout lacks
# are skipped, so older and newer trees build alike.
objs=()
for f in ggml.c ggml-alloc.c ggml-quants.c ggml.cpp ggml-backend.cpp ggml-backend-meta.cpp ggml-opt.cpp ggml-threading.cpp gguf.cpp; do
	[[ -f "$ggml/src/$f" ]] || continue
	case $f in
	*.c) "$cc" -std=gnu11 "${flags[@]}" -c "$ggml/src/$f" -o "$out/obj/$f.o" ;;
	*) "$cxx" -std=gnu++17 "${flags[@]}" -c "$ggml/src/$f" -o "$out/obj/$f.o" ;;
	esac
	objs+=("$out/obj/$f.o")
done
rm -f "$out/libggml-base.a"
ar rcs "$out/libggml-base.a" "${objs[@]}"
"$cxx" "${flags[@]}" -x c -std=gnu11 "$here/q4_0_bench.c" -x none "$out/libggml-base.a" -lpthread -lm -o "$out/q4_0_bench"
echo "built $out/q4_0_bench (ggml $commit, CFLAGS: ${CFLAGS:-none})"
