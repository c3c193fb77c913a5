//! Why a pipeline is not warp-specialized on Hopper (`Pipeline::ws_why`,
//! shown by `tile inspect`): the first condition of `warp_specialized` it
//! fails, in words. `warp_specialized` decides; this only explains, for a
//! pipeline whose consumers run a `wgmma` gemm (the ones that could have
//! been).

use super::{
    consumer_tile_copy, has_pipeline, in_registers, is_pipelined, persistent_body,
    persistent_split, producer_target, registers_only, ws_body, NotPersistent, PRODUCER_THREADS,
};
use crate::ir::*;
use crate::passes::insert_barriers::accesses;
use crate::passes::lower_tile_ops::{tma_refusal, TILE_COPY_RULE};

/// Why pipeline `var` is not warp-specialized, if a `wgmma` gemm in its
/// body made it a candidate on sm_90a.
pub(super) fn ws_refusal(f: &PrimFunc, var: VarId) -> Option<String> {
    if f.arch != CudaArch::Sm90a {
        return None;
    }
    let mut pipe = None;
    f.body.visit(&mut |s| {
        if let Stmt::For {
            var: v,
            kind: ForKind::Pipelined { .. },
            ..
        } = s
        {
            if *v == var {
                pipe = Some(s);
            }
        }
    });
    let pipe = pipe?;
    let Stmt::For { body, .. } = pipe else {
        return None;
    };
    let mut wgmma = false;
    body.visit(&mut |s| {
        wgmma |= matches!(s, Stmt::Gemm(g) if matches!(g.inst, GemmInst::Wgmma { .. }))
    });
    if !wgmma {
        return None;
    }
    let threads = f.launch.threads;
    if threads % 128 != 0 {
        return Some(format!(
            "the block's {threads} threads are not whole warpgroups"
        ));
    }
    if threads + PRODUCER_THREADS > 1024 {
        return Some(format!(
            "a producer warpgroup would take the block's {threads} threads past 1024"
        ));
    }
    let mut block_wide = None;
    f.body.visit(&mut |s| {
        if let Stmt::Reduce(r) = s {
            if block_wide.is_none() && !in_registers(f, r) {
                block_wide = Some(f.buf(r.dst).name.clone());
            }
        }
    });
    if let Some(d) = block_wide {
        return Some(format!(
            "the reduction into `{d}` synchronizes the whole block, which the producer warpgroup leaves at the loop"
        ));
    }
    let top = f.body.items();
    let at = top.iter().position(|s| {
        std::ptr::eq(*s, pipe)
            || matches!(s, Stmt::For { kind: ForKind::Serial, body, .. }
                if has_pipeline(body) && persistent_body(f, body).is_some_and(|p| std::ptr::eq(p, pipe)))
    });
    let Some(at) = at else {
        if let Some(why) = top.iter().find_map(|s| tile_loop_refusal(f, s)) {
            return Some(why);
        }
        return Some(
            "the loop is not in the kernel's top-level sequence, nor the one pipelined loop of a top-level \
             serial loop over tiles (scalar bindings and register stores, the loop, then the epilogue)"
                .into(),
        );
    };
    if let Some(i) = top[..at]
        .iter()
        .position(|x| !registers_only(f, x) && !consumer_tile_copy(f, x))
    {
        return Some(format!(
            "statement {} of the kernel's top level, before the loop, does more than bind scalars, write \
             registers or copy tiles into shared memory",
            i + 1
        ));
    }
    let items = body.items();
    for x in items.iter().take_while(|x| producer_target(f, x).is_some()) {
        let tile = producer_target(f, x)
            .map(|b| f.buf(b).name.clone())
            .unwrap_or_default();
        match x {
            Stmt::Copy {
                inst: CopyInst::Tma { .. },
                ..
            } => {}
            Stmt::Copy {
                src, dst, prefer, ..
            } => {
                return Some(format!(
                    "the copy into `{tile}` is a `cp.async` tile copy, not a bulk tensor copy: {}",
                    tma_refusal(f, src, dst, *prefer)
                ))
            }
            _ => {
                return Some(format!(
                    "the copy into `{tile}` is a loop nest, not a bulk tensor copy (a tile copy is {TILE_COPY_RULE})"
                ))
            }
        }
    }
    if ws_body(f, body).is_some() {
        // It qualifies, but `warp_specialized` looks at the first pipelined
        // loop of the top level only.
        return Some(
            "an earlier pipelined loop of the kernel's top level is the one considered (at most one is \
             warp-specialized)"
                .into(),
        );
    }
    let (mut clears, mut nested) = (None, false);
    for x in items.iter().skip_while(|x| producer_target(f, x).is_some()) {
        x.visit(&mut |y| match y {
            Stmt::Gemm(g) if g.clear && clears.is_none() => clears = Some(f.buf(g.c).name.clone()),
            y if is_pipelined(y) => nested = true,
            _ => {}
        });
    }
    Some(match (clears, nested) {
        (Some(c), _) => format!(
            "the gemm into `{c}` clears its accumulator (`clear_accum = true`); the asynchronous form only accumulates"
        ),
        (None, true) => "a pipelined loop is nested in its body".into(),
        (None, false) => format!(
            "its consumers run no `wgmma` gemm over all {} warpgroups that reads its tiles",
            threads / 128
        ),
    })
}

/// Why `s`, a top-level serial loop over tiles holding a pipelined loop, is
/// not a persistent body the producer can split: the first statement before
/// the pipelined loop it cannot run, or a second pipelined loop.
fn tile_loop_refusal(f: &PrimFunc, s: &Stmt) -> Option<String> {
    let Stmt::For {
        kind: ForKind::Serial,
        body,
        ..
    } = s
    else {
        return None;
    };
    let (i, x) = match persistent_split(f, body) {
        Ok(_) | Err(NotPersistent::NoPipeline) => return None,
        Err(NotPersistent::SecondPipeline) => {
            return Some("the loop over tiles holds a second pipelined loop".into())
        }
        Err(NotPersistent::Prefix(i, x)) => (i, x),
    };
    let lead = format!(
        "in the loop over tiles, statement {} before the pipelined loop",
        i + 1
    );
    Some(match x {
        Stmt::Let { var, .. } => format!(
            "{lead} binds `{}` from memory, which the producer would have to read too",
            f.var(*var).name
        ),
        Stmt::Copy {
            src,
            dst,
            prefer,
            inst,
            ..
        } => {
            let tile = &f.buf(dst.buf).name;
            if matches!(inst, CopyInst::Tma { .. }) {
                format!("{lead} loads `{tile}`, which another statement of the kernel also writes, so the producer cannot load it ahead")
            } else {
                format!(
                    "{lead} copies into `{tile}` with `cp.async`, not a bulk tensor copy the producer can issue ahead: {}",
                    tma_refusal(f, src, dst, *prefer)
                )
            }
        }
        x => match accesses(f, x).writes.iter().next() {
            Some(b) => format!(
                "{lead} fills `{}` with a loop nest, not a bulk tensor copy the producer can issue ahead (a tile copy is {TILE_COPY_RULE})",
                f.buf(*b).name
            ),
            None => format!("{lead} does more than bind scalars, write registers or copy tiles ahead"),
        },
    })
}
