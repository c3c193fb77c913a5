use tile::prelude::*;

#[tile::kernel(block_n = 256, threads = 128)]
pub fn big(a: Tensor<i32, (N,)>, c: TensorMut<u8, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            let x = a[bx * block_n + i] + 3000000000;
            c[bx * block_n + i] = 300u8;
        }
    });
}

fn main() {}
