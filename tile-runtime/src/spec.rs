//! The contract between `#[tile::kernel]` expansions and the runtime: the kernel ABI's
//! `'static` tables (see [`tile_abi::spec`] for the ABI of the generated code).

pub use tile_abi::spec::*;
