# Sourced by build.sh and build_prologue.sh: what kloop.cu needs from a kernel's generated
# source (`tile inspect --emit source`).

# The f16 GEMM kernel's entry name.
kl_name() {
  grep -o 'void __launch_bounds__([0-9]*, [0-9]*) gemm_nn_f16[a-z0-9_]*' "$1" | awk '{print $4}'
}

# Prepends the kernel's tensor maps, from its `// tile:tma` lines, as KL_MAPS: {param (0: A,
# 1: B), box columns, rows}. (nvcc splits -D values at commas, so the list goes into the source.)
kl_mark_maps() {
  local maps
  maps="{$(awk '/__global__/{n++} n==0 && /^\/\/ tile:tma /' "$1" | sed -E 's/.*param=([0-9]+) box=([0-9]+)x([0-9]+).*/{\1,\2,\3}/' | paste -sd,)}"
  sed -i "1i #define KL_MAPS $maps" "$1"
}

# Dynamic shared memory: the last offset the kernel names (its barriers) plus their bytes and
# the 1024-byte alignment slack, so that two-block kernels stay two a multiprocessor.
kl_smem() {
  echo $(( $(grep -o 'tl_smem + [0-9]*' "$1" | awk '{print $3}' | sort -n | tail -1) + 256 + 1024 ))
}

# Copies IN to OUT with kloop.cu's trace hooks after the pipeline's waits.
kl_hooks() {
  sed -e 's/^\( *const int by = (int)blockIdx\.y;\)$/\1 KL_START();/' \
      -e 's/\(tl_pipe1->producer_acquire(tl_st1, [0-9]*);\)$/\1 KL_P(tl_i1);/' \
      -e 's/\(tl_pipe1->consumer_wait(tl_st1);\)$/\1 KL_W(tl_i1);/' \
      -e 's/\(::wait<1>(acc);\)$/\1 KL_M(tl_i1);/' \
      -e 's/\(::wait<0>(acc);\)$/\1 KL_END();/' "$1" > "$2"
}
