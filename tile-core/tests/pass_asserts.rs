//! Focused checks of `inject_bounds`, `insert_barriers` and
//! `demote_fragments` on small functions written as scripts: the property
//! each test names, asserted on the IR's structure rather than its text.

use tile_core::ir::read::read;
use tile_core::ir::{Expr, ForKind, PrimFunc, Scope, Stmt};
use tile_core::passes::run_one;
use tile_core::Target::{self, Cuda};

const C: Target = Target::C;

fn run(pass: &str, text: &str, t: Target) -> PrimFunc {
    let f = read(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    run_one(pass, f, t).unwrap_or_else(|d| panic!("{d}"))
}

/// The top-level statements of the kernel body.
fn top(f: &PrimFunc) -> &[Stmt] {
    match &f.body {
        Stmt::Seq(v) => v,
        s => std::slice::from_ref(s),
    }
}

fn count(s: &Stmt, pred: &dyn Fn(&Stmt) -> bool) -> usize {
    let mut n = 0;
    s.visit(&mut |x| n += usize::from(pred(x)));
    n
}

fn selects(s: &Stmt) -> usize {
    let mut n = 0;
    s.visit_exprs(&mut |e| n += usize::from(matches!(e, Expr::Select(..))));
    n
}

const HEADER: &str = "# tile.prim_func consts()\n";

/// `c[bx * 64 + i] = a[..] + 1` over a ragged dynamic N, on either target.
const RAGGED: &str = r#"def k(a: Tensor((N,), float32), c: TensorMut((N,), float32)):
    N = T.dynamic("N", int32)
    with T.Kernel((((N + 64) - 1) / 64), threads=64) as (bx):
        for i in T.Parallel(0, 64):
            c[((bx * 64) + i)] = (a[((bx * 64) + i)] + T.float32(1.0))
"#;

#[test]
fn inject_bounds_splits_a_ragged_nest_into_interior_and_edge() {
    for t in [C, Cuda] {
        let f = run("inject_bounds", &format!("{HEADER}{RAGGED}"), t);
        let [Stmt::If {
            cond,
            then,
            els: Some(edge),
            ..
        }] = top(&f)
        else {
            panic!("one if/else:\n{}", f.script());
        };
        assert!(cond.uses_var(f.dims[0]), "the interior test reads N");
        // The interior is the original nest, unguarded.
        assert_eq!(count(then, &|s| matches!(s, Stmt::If { .. })), 0);
        assert_eq!(selects(then), 0);
        // The edge guards its store; the load is covered by that guard.
        assert_eq!(count(edge, &|s| matches!(s, Stmt::If { .. })), 1);
        assert_eq!(selects(edge), 0);
        // Fresh loop variables in the edge copy keep names unique.
        let Stmt::For { var: vi, .. } = &**then else {
            panic!("a nest")
        };
        let Stmt::For { var: ve, .. } = &**edge else {
            panic!("a nest")
        };
        assert_ne!(f.var(*vi).name, f.var(*ve).name);
    }
}

#[test]
fn inject_bounds_guards_loads_outside_a_store_guard() {
    // The load is from `a`, the store to shared memory: no store guard
    // covers the load, so it becomes `cond ? a[..] : 0`.
    let text = format!(
        "{HEADER}{}",
        RAGGED
            .replace("with T.Kernel((((N + 64) - 1) / 64), threads=64) as (bx):\n", "with T.Kernel((((N + 64) - 1) / 64), threads=64) as (bx):\n        s = T.alloc_buffer((64,), float32, scope=\"shared\")\n")
            .replace("c[((bx * 64) + i)] =", "s[i] =")
    );
    let f = run("inject_bounds", &text, Cuda);
    let [_, Stmt::If {
        then,
        els: Some(edge),
        ..
    }] = top(&f)
    else {
        panic!("alloc, then an if/else:\n{}", f.script());
    };
    assert_eq!(selects(then), 0);
    assert_eq!(selects(edge), 1, "{}", f.script());
    assert_eq!(count(edge, &|s| matches!(s, Stmt::If { .. })), 0);
}

#[test]
fn inject_bounds_leaves_proven_accesses_alone() {
    // One block per element (grid N): `bx < N` is proven by the grid.
    let text = format!(
        "{HEADER}def k(a: Tensor((N,), float32), c: TensorMut((N,), float32)):\n    \
         N = T.dynamic(\"N\", int32)\n    \
         with T.Kernel(N, threads=32) as (bx):\n        \
         c[bx] = a[bx]\n"
    );
    let f = read(&text).expect("reads");
    let g = run_one("inject_bounds", f.clone(), C).expect("runs");
    assert_eq!(g.body, f.body);
}

/// Two 1 KiB shared tiles written and read in turn, at the pool offsets
/// `off1` and `off2`.
fn phases(off1: i64, off2: i64) -> String {
    let tile = |name: &str, off: i64| {
        format!(
            "        {name} = T.alloc_buffer((256,), float32, scope=\"shared\", smem=[{off}, {}))\n",
            off + 1024
        )
    };
    let phase = |name: &str, n: usize| {
        format!(
            "        for i_{n} in T.Parallel(0, 256):\n            {name}[i_{n}] = a[i_{n}]\n        \
             for j_{n} in T.Parallel(0, 256):\n            c[j_{n}] = {name}[(255 - j_{n})]\n"
        )
    };
    format!(
        "{HEADER}def k(a: Tensor((256,), float32), c: TensorMut((256,), float32)):\n    \
         with T.Kernel(1, threads=256, smem_bytes={}) as (bx):\n{}{}{}{}",
        off1.max(off2) + 1024,
        tile("s1", off1),
        tile("s2", off2),
        phase("s1", 1),
        phase("s2", 2)
    )
}

fn barriers(f: &PrimFunc) -> Vec<usize> {
    top(f)
        .iter()
        .enumerate()
        .filter(|(_, s)| matches!(s, Stmt::Barrier))
        .map(|(i, _)| i)
        .collect()
}

#[test]
fn insert_barriers_orders_the_reuse_of_shared_bytes() {
    // On separate bytes, `s2`'s first write needs no barrier after `s1`'s
    // last read; on the same bytes it does.
    let apart = run("insert_barriers", &phases(0, 1024), Cuda);
    assert_eq!(barriers(&apart), vec![3, 6], "{}", apart.script());
    let shared = run("insert_barriers", &phases(0, 0), Cuda);
    assert_eq!(barriers(&shared), vec![3, 5, 7], "{}", shared.script());
}

#[test]
fn insert_barriers_closes_a_loop_whose_next_iteration_conflicts() {
    let text = format!(
        "{HEADER}def k(a: Tensor((256,), float32), c: TensorMut((256,), float32)):\n    \
         with T.Kernel(1, threads=256, smem_bytes=1024) as (bx):\n        \
         s = T.alloc_buffer((256,), float32, scope=\"shared\", smem=[0, 1024))\n        \
         for k in T.serial(0, 4):\n            \
         for i in T.Parallel(0, 256):\n                s[i] = a[i]\n            \
         for j in T.Parallel(0, 256):\n                c[j] = s[(255 - j)]\n"
    );
    let f = run("insert_barriers", &text, Cuda);
    let [_, Stmt::For { body, .. }] = top(&f) else {
        panic!("{}", f.script())
    };
    let Stmt::Seq(v) = &**body else {
        panic!("a body")
    };
    // write; barrier; read; barrier (before the next iteration's write).
    assert!(matches!(v[1], Stmt::Barrier) && matches!(v[3], Stmt::Barrier));
    assert_eq!(v.len(), 4, "{}", f.script());
    // No barrier inside a parallel loop or an `if`, ever.
    let inner = count(
        body,
        &|s| matches!(s, Stmt::For { kind: ForKind::Parallel, body, .. } if count(body, &|x| matches!(x, Stmt::Barrier)) > 0),
    );
    assert_eq!(inner, 0);
}

/// A fragment `t` (4 x 32) filled by its owners, then used by `use_t`.
fn fragment(use_t: &str) -> String {
    format!(
        "{HEADER}def k(x: Tensor((4, 32), float32), y: TensorMut((4, 32), float32)):\n    \
         with T.Kernel(1, threads=128) as (bx):\n        \
         t = T.alloc_buffer((4, 32), float32, scope=\"local.fragment\")\n        \
         r = T.alloc_buffer((4,), float32, scope=\"local.fragment\")\n        \
         for i in T.Parallel(0, 4):\n            for j in T.Parallel(0, 32):\n                \
         t[i, j] = x[i, j]\n{use_t}"
    )
}

fn scopes(f: &PrimFunc) -> Vec<(String, Scope)> {
    f.buffers
        .iter()
        .skip(f.params.len())
        .map(|b| (b.name.clone(), b.scope))
        .collect()
}

#[test]
fn demote_fragments_keeps_owner_accesses_and_moves_the_rest() {
    let frag = |n: &str| (n.to_string(), Scope::Fragment);
    let shared = |n: &str| (n.to_string(), Scope::Shared);
    // Owners only: both stay.
    let own = "        for i_1 in T.Parallel(0, 4):\n            for j_1 in T.Parallel(0, 32):\n                y[i_1, j_1] = t[i_1, j_1]\n";
    let f = run("demote_fragments", &fragment(own), Cuda);
    assert_eq!(scopes(&f), vec![frag("t"), frag("r")]);
    // A transposed read: another thread's element.
    let transposed = own.replace("t[i_1, j_1]", "t[(3 - i_1), j_1]");
    let f = run("demote_fragments", &fragment(&transposed), Cuda);
    assert_eq!(scopes(&f), vec![shared("t"), frag("r")]);
    // A row reduction of a power-of-two row in registers: `t` stays, the
    // result moves; along dim 0, `t` moves too.
    let f = run(
        "demote_fragments",
        &fragment("        T.reduce_sum(t, r, dim=1, clear=true)\n"),
        Cuda,
    );
    assert_eq!(scopes(&f), vec![frag("t"), shared("r")]);
    let cols = "        c = T.alloc_buffer((32,), float32, scope=\"local.fragment\")\n        T.reduce_sum(t, c, dim=0, clear=true)\n";
    let f = run("demote_fragments", &fragment(cols), Cuda);
    assert_eq!(scopes(&f), vec![shared("t"), frag("r"), shared("c")]);
    // Serial code reading one element: every thread reads it.
    let serial = "        y[0, 0] = t[0, 0]\n";
    let f = run("demote_fragments", &fragment(serial), Cuda);
    assert_eq!(scopes(&f), vec![shared("t"), frag("r")]);
}
