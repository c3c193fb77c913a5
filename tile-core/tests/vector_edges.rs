//! How the CUDA backend prints two vector forms `vectorize` records: a
//! ragged edge whose bounds guard has one value per chunk (tested once, at
//! the chunk's first lane, around whole-vector accesses), and an f32 atomic
//! add of a tensor-core accumulator in register pairs (`tl::atomic_add2`);
//! and what must stay lane by lane: a fragment's guarded reads on the edge.

fn compile(src: &str) -> tile_core::Compiled {
    let def = tile_core::frontend::parse_kernel_source(src).unwrap_or_else(|d| panic!("{}", d[0]));
    tile_core::compile(def).unwrap_or_else(|d| panic!("{}", d[0]))
}

/// The kernel function of a CUDA source, after the library headers.
fn kernel(src: &str) -> &str {
    &src[src.find("__global__").expect("a kernel")..]
}

#[test]
fn a_ragged_edge_moves_whole_vectors_under_one_guard_per_chunk() {
    let c = compile(
        r#"#[tile::kernel(block = 1024, threads = 128)]
        fn add(a: Tensor<f16, (N,)>, b: Tensor<f16, (N,)>, c: TensorMut<f16, (N,)>) {
            T::kernel(T::ceildiv(N, block), threads, |bx| {
                for i in T::parallel(block) {
                    c[bx * block + i] = a[bx * block + i] + b[bx * block + i];
                }
            });
        }"#,
    );
    let src = kernel(&c.cuda_source);
    // Interior, edge with N % 8 == 0, edge lane by lane.
    assert_eq!(src.matches("if (N % 8 == 0) {").count(), 1, "{src}");
    let edge = &src[src.find("if (N % 8 == 0) {").unwrap()..];
    let guard = edge.find("tl_in").expect("a per-chunk guard");
    let load = edge.find("tl::vec<half, 8> tl_ld").expect("vector loads");
    let store = edge
        .find("*(tl::vec<half, 8>*)(&c[")
        .expect("a vector store");
    assert!(
        guard < load && load < store,
        "guard, then loads, then the store:\n{edge}"
    );
    let lanes = &edge[edge.find("} else {").expect("the lane-by-lane form")..];
    assert!(
        lanes.contains("< N)) {\n"),
        "the scalar edge keeps its guard:\n{lanes}"
    );
}

#[test]
fn accumulator_atomic_adds_pair_up() {
    let c = compile(
        r#"#[tile::kernel(block = 64, threads = 128)]
        fn gemm_add(a: Tensor<f16, (M, K)>, b: Tensor<f16, (K, N)>, c: TensorMut<f32, (M, N)>) {
            T::kernel([T::ceildiv(N, block), T::ceildiv(M, block)], threads, |bx, by| {
                let a_s = T::alloc_shared::<f16>([block, 32]);
                let b_s = T::alloc_shared::<f16>([32, block]);
                let acc = T::alloc_fragment::<f32>([block, block]);
                T::clear(acc);
                for ko in T::serial(T::ceildiv(K, 32)) {
                    T::copy(a.at([by * block, ko * 32]), a_s);
                    T::copy(b.at([ko * 32, bx * block]), b_s);
                    T::gemm(a_s, b_s, acc);
                }
                T::atomic_add(c.at([by * block, bx * block]), acc);
            });
        }"#,
    );
    for src in [
        Some(&c.cuda_source),
        c.cuda_sm90a.as_ref().map(|v| &v.source),
    ]
    .into_iter()
    .flatten()
    {
        let k = kernel(src);
        let pair = k.find("tl::atomic_add2(&c[").expect("paired atomic adds");
        let single = k.find("atomicAdd(&c[").expect("the odd-N form");
        assert!(pair < single, "the pair form first, under N % 2 == 0:\n{k}");
        assert!(k.contains("N % 2 == 0"), "{k}");
    }
    assert!(
        !c.c_source.contains("atomic_add2"),
        "the C backend adds one by one"
    );
}

#[test]
fn guarded_fragment_loads_stay_lane_by_lane() {
    // A fragment's chunk is its ownership (4 floats), also on the ragged
    // edge, where each lane's read is guarded: a vector read there would
    // run past the end of the tensor.
    let c = compile(
        r#"#[tile::kernel(block = 1024, threads = 128)]
        fn buffered(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
            T::kernel(T::ceildiv(N, block), threads, |bx| {
                let a_local = T::alloc_fragment::<f32>([block]);
                T::copy(a.at(bx * block), a_local);
                for i in T::parallel(block) {
                    a_local[i] = a_local[i] * 2.0;
                }
                T::copy(a_local, c.at(bx * block));
            });
        }"#,
    );
    let src = kernel(&c.cuda_source);
    let vector_reads = src.matches("*(const tl::vec<float, 4>*)(&a[").count();
    assert_eq!(
        vector_reads, 1,
        "the interior reads vectors, the edge lane by lane:\n{src}"
    );
    assert!(
        src.contains("< N) ? a["),
        "the edge's guarded reads:\n{src}"
    );
}
