# Sourced by the GEMM harness scripts: finds CUDA headers and libraries for nvcc.
# Needs NVCC set. Defines cuda_home, fp16_dir, and fills the arrays inc_flags and
# link_flags for the headers and libraries named:
#   cuda_flags "cuda_fp16.h cublas_v2.h" "cublas"
# Folders searched: the toolkit of NVCC first, then pip's nvidia-* wheels.
cuda_home=$(cd "$(dirname "$NVCC")/.." && pwd)
py_nv=$(ls -d /usr/local/lib/python3*/dist-packages/nvidia /usr/lib/python3*/dist-packages/nvidia \
  /opt/*/.venv/lib/python3*/site-packages/nvidia "$(dirname "$NVCC")/../.." 2>/dev/null || true)
find_dir() {  # find_dir FILE_GLOB: first folder holding the file
  local pat=$1
  for d in "$cuda_home/include" "$cuda_home/lib64" "$cuda_home/lib" "$cuda_home/targets/x86_64-linux/lib" \
           "$cuda_home/targets/x86_64-linux/include" $(for p in $py_nv; do echo "$p"/*/include "$p"/*/lib; done); do
    if compgen -G "$d/$pat" > /dev/null; then echo "$d"; return 0; fi
  done
  return 1
}
cuda_flags() {  # cuda_flags "HEADERS" "LIBS"
  inc_flags=()
  link_flags=()
  local h l d f
  for h in $1; do
    d=$(find_dir "$h") || { echo "cannot find $h"; return 1; }
    inc_flags+=("-I$d")
  done
  for l in $2; do
    d=$(find_dir "lib$l.so*") || { echo "cannot find lib$l"; return 1; }
    if [ -e "$d/lib$l.so" ]; then f="lib$l.so"; else f=$(cd "$d" && ls "lib$l".so.* | sort | head -1); fi
    link_flags+=("-L$d" "-l:$f" "-Xlinker" "-rpath=$d")
  done
  fp16_dir=$(find_dir cuda_fp16.h)
}
