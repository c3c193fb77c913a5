use tile::prelude::*;

// The rejected parameter is reported once: its uses, and a `let` made from
// it, add no errors of their own (a type the parameter never had).
#[tile::kernel(block_n = 64, threads = 64)]
pub fn pair_param(x: Tensor<f16x2, (N,)>, y: TensorMut<f16, (M,)>) {
    T::kernel(T::ceildiv(M, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            let v = x[bx * block_n + i];
            y[bx * block_n + i] = T::low(v) + T::high(x[i]);
        }
    });
}

#[tile::kernel(block_n = 64, threads = 64)]
pub fn pair_misuse(x: Tensor<f16, (N,)>, s: f32, y: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        let pairs = T::alloc_fragment::<f16x2>([block_n]);
        let halves = T::alloc_fragment::<f16>([block_n]);
        let total = T::alloc_fragment::<f32>([1]);
        for i in T::parallel(block_n) {
            let g = bx * block_n + i;
            let p = T::pack2(x[g], x[g]);
            pairs[i] = p;
            let a = p as f32;
            let b = p < p;
            let c = T::exp(p);
            let d = p + s;
            let e = T::low(s);
            let f = T::splat(1.0);
            let h = T::pack2(1.0, 2.0);
            y[g] = s;
        }
        T::copy(pairs, halves);
        T::reduce_sum(pairs, total);
    });
}

fn main() {}
