//! What the blocks of a cluster do together in a warp-specialized pipeline:
//! which of them share a multicast tile (`Group`, from `Pipeline::multicast`
//! and `Pipeline::multicast_y`), how the consumers release stages that other
//! blocks' copies fill, and the end of a k loop split over them
//! (`Pipeline::split`).

use super::*;

/// The blocks of a cluster that share a tile: those of its row (one y, the
/// `Launch::cluster` blocks along x), of its column (one x, the
/// `Launch::cluster_y` along y), or all. Ranks run along x first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Group {
    Row,
    Column,
    Cluster,
}

impl Group {
    /// How pipeline `p` shares tile `t`, if it does.
    pub(super) fn of(p: &Pipeline, t: BufId) -> Option<Group> {
        match (p.multicast.contains(&t), p.multicast_y.contains(&t)) {
            (true, true) => Some(Group::Cluster),
            (true, false) => Some(Group::Row),
            (false, true) => Some(Group::Column),
            (false, false) => None,
        }
    }

    /// The blocks in the group, each loading one part of the tile.
    pub(super) fn parts(self, f: &PrimFunc) -> i64 {
        let (nx, ny) = (f.launch.cluster, f.launch.cluster_y);
        match self {
            Group::Row => nx,
            Group::Column => ny,
            Group::Cluster => nx * ny,
        }
    }

    /// This block's part, from its rank in the cluster (`tl_rank{k}`).
    pub(super) fn part(self, f: &PrimFunc, k: usize) -> String {
        let nx = f.launch.cluster;
        match (self, f.launch.cluster_y) {
            (Group::Row, 1) | (Group::Cluster, _) => format!("tl_rank{k}"),
            (Group::Row, _) => format!("tl_rank{k} % {nx}u"),
            (Group::Column, _) => format!("tl_rank{k} / {nx}u"),
        }
    }

    /// The ranks of the group's blocks, as a bit mask (bit r: rank r).
    pub(super) fn mask(self, f: &PrimFunc, k: usize) -> String {
        let (nx, ny) = (f.launch.cluster, f.launch.cluster_y);
        match (self, ny) {
            (Group::Row, 1) | (Group::Cluster, _) => format!("0x{:x}u", (1u32 << (nx * ny)) - 1),
            (Group::Row, _) => format!(
                "(0x{:x}u << (tl_rank{k} / {nx}u * {nx}u))",
                (1u32 << nx) - 1
            ),
            (Group::Column, _) => {
                let column: u32 = (0..ny).map(|j| 1u32 << (j * nx)).sum();
                format!("(0x{column:x}u << (tl_rank{k} % {nx}u))")
            }
        }
    }
}

impl Writer<'_> {
    /// The end of a loop split over a cluster (`Pipeline::split`): the blocks
    /// other than the first leave their partial sums in their own shared
    /// memory, where the stages were (`plan_pipelines` checked they fit);
    /// the first adds them to its accumulators in rank order; then only it
    /// goes on.
    pub(super) fn split_sum(&mut self, sp: &Split) -> Result<(), Diagnostic> {
        let f = self.f;
        let threads = f.launch.threads;
        // Each accumulator's call arguments after the operation's name: its
        // type, registers a thread and threads, then the registers and where
        // they meet (the accumulators one after the other from byte 0).
        let mut parts = Vec::new();
        let mut off = 0;
        for &acc in &sp.accs {
            let b = f.buf(acc);
            let regs = b.const_elems() / threads;
            if b.dtype.bytes() != 4 || regs % 4 != 0 || regs * threads != b.const_elems() {
                return Err(err(format!(
                    "internal error: a split accumulator `{}` of {regs} registers a thread",
                    b.name
                )));
            }
            parts.push(format!(
                "<{}, {regs}, {threads}>({}, tl_smem + {off}",
                ty(b.dtype)?,
                self.name(acc)
            ));
            off += b.const_bytes();
        }
        let calls = |op: &str, tail: &str| -> Vec<String> {
            parts
                .iter()
                .map(|p| format!("tl::tma::{op}{p}{tail});"))
                .collect()
        };
        let (leave, gather) = (calls("split_leave", ""), calls("split_gather", ", tl_q"));
        self.line(&format!(
            "// K split over a cluster of {} blocks: the partial sums meet in its first block",
            sp.blocks
        ));
        self.line("if (tl_ksplit) {");
        self.depth += 1;
        self.line(&format!("if (tl_krank != 0) {{ {} }}", leave.join(" ")));
        self.line("tl::tma::cluster_sync();");
        self.line(&format!(
            "if (tl_krank == 0) for (unsigned tl_q = 1; tl_q < {}; ++tl_q) {{ {} }}",
            sp.blocks,
            gather.join(" ")
        ));
        self.line("tl::tma::cluster_sync();");
        self.depth -= 1;
        self.line("}");
        self.line("if (tl_krank != 0) return;");
        Ok(())
    }

    /// Whether the warp-specialized pipeline's tiles are shared by the
    /// blocks of a cluster (`WsPlan::multicast`).
    pub(super) fn shares_tiles(&self) -> bool {
        self.ws.as_ref().is_some_and(|p| !p.multicast.is_empty())
    }

    /// The argument that makes pipeline `k`'s consumers release each stage
    /// in every block of a cluster when its copies are multicast (none when
    /// nothing is shared).
    pub(super) fn release_cluster(&self, k: usize) -> String {
        if self.shares_tiles() {
            format!(", tl_mc{k}")
        } else {
            String::new()
        }
    }
}
