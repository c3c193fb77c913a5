// Two sequential phases, each staging a 16 KiB tile in shared memory: the
// second tile is only live after the first is dead, so both use the same
// bytes (16 KiB in all, not 32 KiB), and the barrier before the second
// phase's first write orders it after the first phase's last read.
#[tile::kernel(bm = 64, bn = 64, threads = 128)]
pub fn two_phase_shared(a: Tensor<f32, (M, N)>, b: Tensor<f32, (M, N)>, c: TensorMut<f32, (M, N)>, d: TensorMut<f32, (M, N)>) {
    T::kernel([T::ceildiv(N, bn), T::ceildiv(M, bm)], threads, |bx, by| {
        let s1 = T::alloc_shared::<f32>([bm, bn]);
        let s2 = T::alloc_shared::<f32>([bm, bn]);
        T::copy(a.at([by * bm, bx * bn]), s1);
        for (i, j) in T::parallel([bm, bn]) {
            c[(by * bm + i, bx * bn + j)] = s1[(j, i)] + 1.0;
        }
        T::copy(b.at([by * bm, bx * bn]), s2);
        for (i, j) in T::parallel([bm, bn]) {
            d[(by * bm + i, bx * bn + j)] = s2[(j, i)] * 2.0;
        }
    });
}
