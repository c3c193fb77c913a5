# Sourced by the k-loop run scripts on the GPU machine: prints the GPU and its clock
# limit and exports KL_CUBLAS, the cuBLAS library for kloop's same-process rows (the
# one beside torch first, else the toolkit's).
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
KL_CUBLAS=$(python3 -c "import glob,os,nvidia.cublas as c; print(sorted(glob.glob(os.path.join(list(c.__path__)[0],'lib','libcublas.so*')))[0])" 2>/dev/null \
  || ls /usr/local/cuda/lib64/libcublas.so* 2>/dev/null | head -1)
export KL_CUBLAS
echo "cublas: $KL_CUBLAS"
