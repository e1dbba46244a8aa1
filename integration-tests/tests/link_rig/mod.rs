//! The link tests' rig lives in the library (`rttscope_integration_tests::link_rig`), where the
//! link matrix benchmark uses it too.

#[allow(unused_imports)] // each test binary uses its own part
pub use rttscope_integration_tests::link_rig::*;
