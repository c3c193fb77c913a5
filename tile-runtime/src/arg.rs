//! The arguments of a launch: tensors seen through the host ABI.

use std::fmt;
use std::sync::Arc;

use crate::device::Device;
use crate::dtype::{DType, Element};
use crate::tensor::{Storage, Tensor};

/// One argument of a launch: a tensor seen through the host ABI.
pub struct ArgRef<'a> {
    pub(crate) dtype: DType,
    pub(crate) shape: &'a [usize],
    pub(crate) strides: &'a [isize],
    /// Host address or CUDA device address of the first element.
    pub(crate) ptr: usize,
    pub(crate) device: Device,
    pub(crate) output: bool,
    pub(crate) storage: &'a Arc<Storage>,
}

impl<'a> ArgRef<'a> {
    /// A buffer the kernel only reads.
    pub fn input<T: Element>(t: &'a Tensor<T>) -> ArgRef<'a> {
        ArgRef {
            dtype: T::DTYPE,
            shape: t.shape(),
            strides: t.strides(),
            ptr: t.data_ptr(),
            device: t.device(),
            output: false,
            storage: t.storage(),
        }
    }

    /// A buffer the kernel writes.
    pub fn output<T: Element>(t: &'a mut Tensor<T>) -> ArgRef<'a> {
        ArgRef {
            output: true,
            ..ArgRef::input(t)
        }
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The extent of each dim.
    pub fn shape(&self) -> &[usize] {
        self.shape
    }

    /// The stride of each dim, in elements.
    pub fn strides(&self) -> &[isize] {
        self.strides
    }

    /// Host address or CUDA device address of the first element.
    pub fn ptr(&self) -> usize {
        self.ptr
    }

    /// The device the tensor lives on.
    pub fn device(&self) -> Device {
        self.device
    }

    /// Whether the kernel writes this buffer (made by [`ArgRef::output`]).
    pub fn is_output(&self) -> bool {
        self.output
    }

    pub(crate) fn storage_addr(&self) -> usize {
        Arc::as_ptr(self.storage) as usize
    }
}

impl fmt::Debug for ArgRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ArgRef")
            .field("dtype", &self.dtype)
            .field("shape", &self.shape)
            .field("strides", &self.strides)
            .field("ptr", &format_args!("{:#x}", self.ptr))
            .field("device", &self.device)
            .field("output", &self.output)
            .finish()
    }
}
