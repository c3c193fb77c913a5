//! The two targets a kernel is generated for and runs on.

use core::fmt;

/// A code generation target: C run on the host CPU, or CUDA C++ run on a GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    /// C for the host CPU.
    Cpu,
    /// CUDA C++ (sm_80 and newer).
    Cuda,
}

impl Target {
    /// The compiler's name for [`Target::Cpu`]: the language it generates (usable in
    /// patterns).
    pub const C: Target = Target::Cpu;

    /// The target that runs on `device` (the runtime's `Device` converts into one).
    pub fn of(device: impl Into<Target>) -> Target {
        device.into()
    }

    /// `cpu` or `cuda`: the spelling in cache entries and messages.
    pub const fn name(self) -> &'static str {
        match self {
            Target::Cpu => "cpu",
            Target::Cuda => "cuda",
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
