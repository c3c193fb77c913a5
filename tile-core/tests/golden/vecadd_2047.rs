// N = 2047 does not divide the tile: the generated code keeps a bounds check
// and gives up vectorization (the second form of the source, §5.3).
#[tile::kernel(n = 2047, block_n = 2048, threads = 256)]
pub fn vecadd(a: Tensor<bf16, (n,)>, b: Tensor<bf16, (n,)>, c: TensorMut<bf16, (n,)>) {
    T::kernel(T::ceildiv(n, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            c[bx * block_n + i] = a[bx * block_n + i] + b[bx * block_n + i];
        }
    });
}
