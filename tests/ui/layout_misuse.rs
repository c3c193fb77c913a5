use tile::prelude::*;

#[tile::kernel(b = 64, threads = 128)]
pub fn bad_layouts(a: Tensor<f32, (b, b)>) {
    T::kernel(1, threads, |bx| {
        let f = T::alloc_fragment::<f16>([b, b]);
        let s = T::alloc_shared::<f32>([b, b]);
        let h = T::alloc_shared::<f16>([b, 24]);
        let g = T::alloc_shared::<f16>([b, b]);
        T::annotate_layout(f, T::swizzled);
        T::annotate_layout(s, T::swizzled);
        T::annotate_layout(h, T::swizzled);
        T::annotate_layout(g, T::row_major);
        T::annotate_layout(g);
    });
}

fn main() {}
