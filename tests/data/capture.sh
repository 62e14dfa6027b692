#!/usr/bin/env bash
# How the real reports in tests/data were captured: on the GPU machine, from the repository
# root, with the scenario modules and NVIDIA's nsys (see ../shared/NSYS.md for the nsys used).
#   usage: tests/data/capture.sh OUTDIR [module ...]
# Writes OUTDIR/<scenario>-<variant>.{nsys-rep,sqlite,result.json,log} and OUTDIR/manifest.txt.
set -u
out=${1:?usage: capture.sh OUTDIR [module ...]}; shift
nsys=${GPUGAP_NSYS:-nsys}
modules=${*:-h2d_copy default_stream grid_sweep cublas_warmup moe_experts prefetch_pipeline}
mkdir -p "$out"
{
  echo "captured_utc: $(date -u +%FT%TZ)"
  echo "gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  echo "cuda_driver_api: $(nvidia-smi | grep -o 'CUDA Version: [0-9.]*')"
  echo "nsys: $($nsys --version)"
  echo "python: $(python3 --version)"
  python3 -c 'import torch; print("torch:", torch.__version__, "cuda", torch.version.cuda)'
  python3 -c 'import cuda.bindings, cuda.core; print("cuda-bindings:", cuda.bindings.__version__, "cuda-core:", cuda.core.__version__)'
  echo "profile: $nsys profile -t cuda,nvtx,osrt,cublas --sample=none --cpuctxsw=none --export=sqlite -o OUT python3 -m scenarios.MODULE --variant VARIANT"
} > "$out/manifest.txt" 2>&1
for mod in $modules; do
  for variant in bad good; do
    name="${mod//_/-}-$variant"
    start=$(date +%s%N)
    "$nsys" profile -t cuda,nvtx,osrt,cublas --sample=none --cpuctxsw=none \
      --force-overwrite=true --export=sqlite -o "$out/$name" \
      python3 -m scenarios."$mod" --variant "$variant" --result "$out/$name.result.json" \
      > "$out/$name.log" 2>&1
    rc=$?
    printf '%-28s rc=%s %6sms sqlite=%s\n' "$name" "$rc" "$(( ($(date +%s%N) - start) / 1000000 ))" \
      "$(stat -c %s "$out/$name.sqlite" 2>/dev/null || echo missing)"
    [ $rc -eq 0 ] || tail -n 15 "$out/$name.log"
  done
done
