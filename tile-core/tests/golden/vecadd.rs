// Version A of the source's vector add, N divisible by the tile: the
// generated CUDA uses 128-bit vector accesses.
#[tile::kernel(n = 1048576, block_n = 1024, threads = 128)]
pub fn vecadd(a: Tensor<f16, (n,)>, b: Tensor<f16, (n,)>, c: TensorMut<f16, (n,)>) {
    T::kernel(T::ceildiv(n, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            c[bx * block_n + i] = a[bx * block_n + i] + b[bx * block_n + i];
        }
    });
}
