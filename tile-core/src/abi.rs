//! A compiled kernel as the runtime sees it: its [`KernelDesc`], the one place that
//! turns the IR's parameters, dims and grid into the kernel ABI. The macro quotes it
//! into a launcher's constants; `tile inspect` leaks it into a spec.

use tile_abi::spec::DimSpec;
use tile_abi::{CpuDesc, CudaDesc, Grid, GridOp, KernelDesc, ParamDesc};

use crate::ir::{BinOp, Expr, PrimFunc, VarId};
use crate::Compiled;

/// The description of `c` (parameters, dims, grid, sources and keys).
pub fn describe(c: &Compiled) -> Result<KernelDesc, String> {
    let f = &c.def.func;
    let params = f
        .params
        .iter()
        .enumerate()
        .map(|(i, &b)| {
            let buf = f.buf(b);
            let shape = buf
                .shape
                .iter()
                .map(|d| match d {
                    Expr::Int(v, _) => Ok(DimSpec::Static(*v)),
                    Expr::Var(v, _) => Ok(DimSpec::Dyn(dim_index(f, *v)?)),
                    _ => Err("a parameter shape that is neither a constant nor a dim".to_string()),
                })
                .collect::<Result<Vec<_>, String>>()?;
            Ok(ParamDesc {
                name: buf.name.clone(),
                dtype: buf.dtype,
                shape,
                output: buf.mutable,
                align: c.param_align.get(i).copied().unwrap_or(1),
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    let mut grid = [Grid::Const(1), Grid::Const(1), Grid::Const(1)];
    for (slot, e) in grid.iter_mut().zip(&f.launch.grid) {
        *slot = grid_of(f, e)?;
    }
    Ok(KernelDesc {
        name: f.name.clone(),
        params,
        scalars: f
            .scalars
            .iter()
            .map(|&s| (f.var(s).name.clone(), f.var(s).dtype))
            .collect(),
        dims: f.dims.iter().map(|&d| f.var(d).name.clone()).collect(),
        grid,
        threads: f.launch.threads as u32,
        ir: c.script.clone(),
        cpu: CpuDesc {
            key: c.c_key.clone(),
            symbol: c.c_symbol.clone(),
            source: c.c_source.clone(),
        },
        cuda: CudaDesc {
            key: c.cuda_key.clone(),
            entry: c.cuda_entry.clone(),
            source: c.cuda_source.clone(),
            shared_bytes: c.cuda_shared_bytes as u32,
        },
        cuda_sm90a: c.cuda_sm90a.as_ref().map(|v| CudaDesc {
            key: v.key.clone(),
            entry: v.entry.clone(),
            source: v.source.clone(),
            shared_bytes: v.shared_bytes as u32,
        }),
    })
}

fn dim_index(f: &PrimFunc, v: VarId) -> Result<u32, String> {
    f.dims
        .iter()
        .position(|d| *d == v)
        .map(|i| i as u32)
        .ok_or_else(|| "a shape or grid uses a variable that is not a dynamic dim".to_string())
}

fn grid_of(f: &PrimFunc, e: &Expr) -> Result<Grid, String> {
    Ok(match e {
        Expr::Int(v, _) => Grid::Const(*v),
        Expr::Var(v, _) => Grid::Dim(dim_index(f, *v)?),
        Expr::Cast(_, a) => grid_of(f, a)?,
        Expr::Bin(op, a, b, _) => {
            let op = match op {
                BinOp::Add => GridOp::Add,
                BinOp::Sub => GridOp::Sub,
                BinOp::Mul => GridOp::Mul,
                BinOp::Div => GridOp::Div,
                BinOp::Rem => GridOp::Mod,
                BinOp::Min => GridOp::Min,
                BinOp::Max => GridOp::Max,
                _ => return Err("unsupported operator in the grid".into()),
            };
            Grid::Op(op, Box::new(grid_of(f, a)?), Box::new(grid_of(f, b)?))
        }
        _ => return Err("unsupported grid expression".into()),
    })
}
