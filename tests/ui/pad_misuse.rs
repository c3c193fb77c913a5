use tile::prelude::*;

#[tile::kernel(block_m = 32, block_n = 64, threads = 128)]
pub fn pad_from_shared(a: Tensor<f16, (M, N)>, c: TensorMut<f16, (M, N)>) {
    T::kernel([T::ceildiv(N, block_n), T::ceildiv(M, block_m)], threads, |bx, by| {
        let a_s = T::alloc_shared::<f16>([block_m, block_n]);
        let c_l = T::alloc_fragment::<f16>([block_m, block_n]);
        T::copy(a.at([by * block_m, bx * block_n]), a_s);
        T::copy(a_s, c_l, pad = -1.0);
        T::copy(c_l, c.at([by * block_m, bx * block_n]));
    });
}

#[tile::kernel(block_m = 32, block_n = 64, threads = 128)]
pub fn pad_with_a_tile_copy(a: Tensor<f16, (M, N)>, c: TensorMut<f16, (M, N)>) {
    T::kernel([T::ceildiv(N, block_n), T::ceildiv(M, block_m)], threads, |bx, by| {
        let a_s = T::alloc_shared::<f16>([block_m, block_n]);
        T::copy(a.at([by * block_m, bx * block_n]), a_s, instruction = "cp_async", pad = -1.0);
        T::copy(a_s, c.at([by * block_m, bx * block_n]));
    });
}

#[tile::kernel(block_n = 64, threads = 64)]
pub fn padded_misuse(x: Tensor<i32, (N,)>, y: TensorMut<i32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        let s = T::alloc_shared::<i32>([block_n]);
        T::copy(x.at(bx * block_n), s);
        for i in T::parallel(block_n) {
            let g = bx * block_n + i;
            y[g] = T::padded(s[i], 1) + T::padded(g, 1) + T::padded(x[g + 1], 0.5);
        }
    });
}

fn main() {}
