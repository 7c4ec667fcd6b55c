//! A driver's descriptor, lent to `poll` and to the caller: every driver holds
//! one, and says which once.

/// Implements `AsFd` and `AsRawFd` for `$ty`, whose descriptor is its field
/// `$field` (anything with an `as_fd` method).
macro_rules! descriptor_is {
    ($ty:ty, $field:ident) => {
        impl std::os::fd::AsFd for $ty {
            fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
                self.$field.as_fd()
            }
        }

        impl std::os::fd::AsRawFd for $ty {
            fn as_raw_fd(&self) -> std::os::fd::RawFd {
                std::os::fd::AsRawFd::as_raw_fd(&std::os::fd::AsFd::as_fd(self))
            }
        }
    };
}
